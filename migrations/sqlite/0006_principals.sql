-- Who acted (DESIGN §10): the principal a session belongs to (the one that created it) and
-- the principal whose request ran each call. NULL for rows written before these columns.
ALTER TABLE sessions ADD COLUMN principal TEXT;
ALTER TABLE calls ADD COLUMN principal TEXT;
-- The principal whose request caused an event; NULL when none did.
ALTER TABLE events ADD COLUMN actor TEXT;
