-- Several processes on one database (`toold mcp` per editor window beside a `toold serve`):
-- nothing unique may be numbered by one process alone any more.
--
-- 1. `calls.cursor` is given by SQLite when a row is inserted (max + 1 inside the writer's
--    transaction, which holds the database's write lock), no longer by the process that
--    journalled the row. What makes putting a journalled row into the table idempotent is
--    now its `journal_key`: the journal's id in the high 32 bits, the row's place in that
--    journal in the low 32. Rows not from a journal (interrupted calls) have none.
-- 2. `journals` hands out those ids, one per process that opens the store, and says which
--    process it was (for an operator looking at a journal file left behind).
ALTER TABLE calls ADD COLUMN journal_key INTEGER;
CREATE UNIQUE INDEX calls_by_journal_key ON calls (journal_key) WHERE journal_key IS NOT NULL;

CREATE TABLE journals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pid INTEGER NOT NULL,
    opened_at INTEGER NOT NULL
);
