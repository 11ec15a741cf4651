-- The audit log queried across sessions (`GET /v1/calls` with filters, its export, retention).
--
-- Who decided and what, read from the decision JSON by generated columns, so that neither
-- write path renders them and a filter on them is a plain comparison (the same SQL as
-- SQLite's). STORED: Postgres 15 has no other kind; the text-to-jsonb cast is immutable.
ALTER TABLE calls ADD COLUMN decision_kind TEXT
    GENERATED ALWAYS AS ((decision::jsonb) ->> 'decision') STORED;
ALTER TABLE calls ADD COLUMN decided_by TEXT
    GENERATED ALWAYS AS ((decision::jsonb) -> 'decided_by' ->> 'by') STORED;

-- One index per filter a security review starts from, each ending in the cursor so that a
-- newest-first page walks it backwards and stops after a page (no sort).
CREATE INDEX calls_by_principal ON calls (principal, cursor);
CREATE INDEX calls_by_tool ON calls (tool, cursor);
CREATE INDEX calls_by_requested_name ON calls (requested_name, cursor);
CREATE INDEX calls_by_decided_by ON calls (decided_by, cursor);
-- Errors are the few rows: partial indexes stay small.
CREATE INDEX calls_by_error_kind ON calls (error_kind, cursor) WHERE error_kind IS NOT NULL;
CREATE INDEX calls_by_batch ON calls (batch_id);
CREATE INDEX calls_by_trace ON calls (trace_id) WHERE trace_id IS NOT NULL;
-- Time windows, and retention (which deletes the oldest rows first).
CREATE INDEX calls_by_started_at ON calls (started_at);
