-- The trace a call ran in (32 lowercase hex digits, DESIGN §9): the exported span's trace, or
-- the `traceparent` the request brought when traces are not exported. NULL when there was
-- none, and for rows written before this column.
ALTER TABLE calls ADD COLUMN trace_id TEXT;
