//! The service façade over a real SQLite store: sessions, tools, batches in every shape,
//! idempotent retries, interrupts, closing, restarts, the audit log and offloaded results.

mod batches;
pub mod harness;
mod offload;
mod sessions;
