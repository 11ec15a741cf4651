-- A security review's first question, "every `bash` call denied yesterday": the decision and
-- the tool together, ending in the cursor, so that a newest-first page walks one index
-- backwards and stops after a page. `tool` matches the resolved or the requested name, so
-- the query walks one index per name (`store/call_query.rs`); with `(tool, cursor)` alone it
-- read every `bash` row to find the denied ones (3.1 s a page at 10,000,000 rows).
CREATE INDEX calls_by_decision_tool ON calls (decision_kind, tool, cursor);
CREATE INDEX calls_by_decision_requested_name ON calls (decision_kind, requested_name, cursor);
