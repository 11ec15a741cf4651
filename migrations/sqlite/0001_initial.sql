-- toold's SQLite schema, first version.
--
-- Conventions: times are INTEGER milliseconds since the Unix epoch (UTC); JSON is TEXT holding
-- serde_json's rendering; booleans are INTEGER 0/1. Only batches and approvals reference
-- sessions: the audit log, results and events accept rows for any session id, because the
-- core writes them through its sinks whether or not the session was persisted, and an audit
-- row must never be refused.

CREATE TABLE sessions (
    -- Creation order, for listing; stable across VACUUM unlike an implicit rowid.
    ordinal INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    working_directory TEXT NOT NULL,
    permission_mode TEXT NOT NULL,
    interactive INTEGER NOT NULL,
    owner TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    closed_at INTEGER,
    options TEXT NOT NULL,
    state TEXT NOT NULL
);

-- The audit log: one row per call, never updated or deleted.
CREATE TABLE calls (
    cursor INTEGER PRIMARY KEY AUTOINCREMENT,
    node TEXT NOT NULL,
    session_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    call_index INTEGER NOT NULL,
    requested_name TEXT NOT NULL,
    tool TEXT,
    input TEXT NOT NULL,
    -- The PermissionDecision as JSON, including who decided; NULL when none was made.
    decision TEXT,
    is_error INTEGER NOT NULL,
    error_kind TEXT,
    output_chars INTEGER NOT NULL,
    result_id TEXT,
    result_total_chars INTEGER,
    started_at INTEGER NOT NULL,
    duration_ms REAL NOT NULL
);
CREATE INDEX calls_by_session ON calls (session_id, cursor);

-- Offloaded outputs: one row per result, the text in chunks of `chunk_chars` characters.
CREATE TABLE results (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    total_chars INTEGER NOT NULL,
    chunk_chars INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

-- A rowid table on purpose: chunks are large, and WITHOUT ROWID suits small rows only.
CREATE TABLE result_chunks (
    result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
    -- The character offset of the chunk's first character in the whole output.
    char_offset INTEGER NOT NULL,
    char_count INTEGER NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (result_id, char_offset)
);

CREATE TABLE batches (
    batch_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    format TEXT NOT NULL,
    idempotency_key TEXT,
    request_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed')),
    call_count INTEGER NOT NULL,
    -- The results as a JSON array, NULL until the batch completes.
    results TEXT,
    created_at INTEGER NOT NULL,
    completed_at INTEGER,
    -- NULLs are distinct in SQLite's UNIQUE, so batches without a key never collide.
    UNIQUE (session_id, idempotency_key)
);

-- Events for replay; seq is given by the event bus.
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    ts INTEGER NOT NULL,
    type TEXT NOT NULL,
    session_id TEXT NOT NULL,
    batch_id TEXT,
    call_id TEXT,
    tool TEXT,
    data TEXT NOT NULL
);
CREATE INDEX events_by_session ON events (session_id, seq);
CREATE INDEX events_by_ts ON events (ts);

CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    decision TEXT CHECK (decision IN ('allow', 'deny')),
    decided_by TEXT,
    decided_at INTEGER
);
CREATE INDEX approvals_pending ON approvals (session_id, created_at) WHERE decision IS NULL;
