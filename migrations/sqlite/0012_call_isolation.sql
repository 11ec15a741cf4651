-- Where a call ran (DESIGN §12: "the tier is on the session and on every audit row"): an
-- environment session's isolation tier (`bwrap`, `landlock`, `gvisor`) on each of its rows;
-- in a plain session, the sandbox a bash call ran in (`bwrap`, `landlock`, `none`). NULL for
-- a plain session's other tools (they run in the daemon), for calls that never ran, and for
-- rows written before this column.
ALTER TABLE calls ADD COLUMN isolation TEXT;
