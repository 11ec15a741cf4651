-- Who stopped a cancelled call (`session_close`, `session_interrupt`, `mcp_client`); NULL for
-- every other call, and for rows written before this column.
ALTER TABLE calls ADD COLUMN cancelled_by TEXT;
