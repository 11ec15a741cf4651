-- toold's Postgres schema, first version: the same tables as SQLite's, for several daemons
-- sharing one database.
--
-- Conventions: times are BIGINT milliseconds since the Unix epoch (UTC), as in SQLite, so both
-- backends keep the same precision; JSON is TEXT holding serde_json's rendering (jsonb would
-- reorder keys and reformat numbers). Text a model or client chooses (call ids, tool names as
-- requested, idempotency keys, result chunks) is BYTEA holding UTF-8: Postgres TEXT cannot
-- hold U+0000, and an audit row must never be refused.

CREATE TABLE sessions (
    ordinal BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    working_directory TEXT NOT NULL,
    permission_mode TEXT NOT NULL,
    interactive BOOLEAN NOT NULL,
    -- The node id of the daemon that runs the session.
    owner TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    closed_at BIGINT,
    options TEXT NOT NULL,
    state TEXT NOT NULL
);
CREATE INDEX sessions_open_by_owner ON sessions (owner) WHERE closed_at IS NULL;

-- The daemons using this database: where to reach them, and their heartbeat.
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    -- The node that cleaned up after this one once it fell silent; NULL while alive.
    claimed_by TEXT
);

-- The audit log: one row per call, never updated or deleted.
CREATE TABLE calls (
    cursor BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node TEXT NOT NULL,
    session_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    call_id BYTEA NOT NULL,
    call_index BIGINT NOT NULL,
    requested_name BYTEA NOT NULL,
    tool BYTEA,
    input TEXT NOT NULL,
    decision TEXT,
    is_error BOOLEAN NOT NULL,
    error_kind TEXT,
    output_chars BIGINT NOT NULL,
    result_id TEXT,
    result_total_chars BIGINT,
    started_at BIGINT NOT NULL,
    duration_ms DOUBLE PRECISION NOT NULL,
    interrupted BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX calls_by_session ON calls (session_id, cursor);

CREATE TABLE results (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    call_id BYTEA NOT NULL,
    total_chars BIGINT NOT NULL,
    chunk_chars BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE result_chunks (
    result_id TEXT NOT NULL REFERENCES results (id) ON DELETE CASCADE,
    char_offset BIGINT NOT NULL,
    char_count BIGINT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (result_id, char_offset)
);

CREATE TABLE batches (
    batch_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    format TEXT NOT NULL,
    idempotency_key BYTEA,
    request_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed')),
    call_count BIGINT NOT NULL,
    results TEXT,
    created_at BIGINT NOT NULL,
    completed_at BIGINT,
    -- NULLs are distinct in a UNIQUE constraint, so batches without a key never collide.
    UNIQUE (session_id, idempotency_key)
);

-- Events for replay. Seqs are numbered under the lock of `event_seq`'s one row, held until
-- commit, so they commit in seq order whichever daemon writes them.
CREATE TABLE events (
    seq BIGINT PRIMARY KEY,
    ts BIGINT NOT NULL,
    type TEXT NOT NULL,
    session_id TEXT NOT NULL,
    batch_id TEXT,
    call_id BYTEA,
    tool BYTEA,
    data TEXT NOT NULL
);
CREATE INDEX events_by_session ON events (session_id, seq);

CREATE TABLE event_seq (
    only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
    last_seq BIGINT NOT NULL
);
INSERT INTO event_seq (last_seq) VALUES (0);

CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    call_id BYTEA NOT NULL,
    tool TEXT NOT NULL,
    input TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    decision TEXT CHECK (decision IN ('allow', 'deny')),
    decided_by TEXT,
    decided_at BIGINT
);
CREATE INDEX approvals_pending ON approvals (session_id, created_at) WHERE decision IS NULL;
