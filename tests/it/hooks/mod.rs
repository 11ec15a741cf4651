//! Hooks from the settings, run for real: shell scripts as command hooks and a loopback HTTP
//! server as an HTTP hook, around the real `bash` tool in a real dispatcher. Covers exit 2,
//! JSON deny and ask, `updatedInput` chained across hooks and re-validated, timeouts,
//! `on_failure`, the post hooks' `tool_response`, and the clean environment.

mod command;
mod harness;
mod http;
