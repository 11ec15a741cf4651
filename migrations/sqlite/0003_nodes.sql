-- Daemons and interrupted calls (the Postgres store issue; SQLite has one daemon, but keeps the
-- same records so the conformance suite and a restart after a crash behave alike).

CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    claimed_by TEXT
);

-- An audit row written for a call whose daemon stopped before it finished.
ALTER TABLE calls ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;
