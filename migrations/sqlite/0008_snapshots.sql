-- Snapshots (DESIGN §12): a session's filesystem frozen into layers, which sessions made from
-- it stack as read-only lowers. `layers` is a JSON array of absolute directory paths, topmost
-- first; `copy` says how it was frozen ("cow" or "full").
CREATE TABLE snapshots (
    id TEXT PRIMARY KEY,
    principal TEXT,
    session_id TEXT NOT NULL,
    name TEXT,
    layers TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    copy TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX snapshots_by_principal ON snapshots (principal, created_at);

-- The lowers each session's view stacks now (none: a plain directory, no row), so a restarted
-- daemon mounts its sessions again.
CREATE TABLE session_views (
    session_id TEXT PRIMARY KEY,
    layers TEXT NOT NULL
);
