-- Lighter writes on the hot path: every call writes an audit row and three or four events.
--
-- 1. `calls.cursor` loses AUTOINCREMENT. AUTOINCREMENT reads and rewrites the row of
--    `sqlite_sequence` on every insert; a plain INTEGER PRIMARY KEY takes max(cursor) + 1,
--    which is just as increasing for a table whose rows are never deleted (the audit log).
-- 2. `events_by_ts` goes: pruning by age walks the events in seq order instead (a seq is
--    given in time order), so no index has to follow every insert for an hourly delete.

CREATE TABLE calls_new (
    cursor INTEGER PRIMARY KEY,
    node TEXT NOT NULL,
    session_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    requested_name TEXT NOT NULL,
    tool TEXT,
    input TEXT NOT NULL,
    decision TEXT,
    is_error INTEGER NOT NULL,
    error_kind TEXT,
    output_chars INTEGER NOT NULL,
    result_id TEXT,
    result_total_chars INTEGER,
    started_at INTEGER NOT NULL,
    duration_ms REAL NOT NULL
);
INSERT INTO calls_new SELECT * FROM calls;
DROP TABLE calls;
ALTER TABLE calls_new RENAME TO calls;
CREATE INDEX calls_by_session ON calls (session_id, cursor);

DROP INDEX events_by_ts;
