//! The store conformance suite: every `Store` method, written against `Arc<dyn Store>` so the
//! same tests run against each backend (SQLite today; Postgres joins through `harness`).
//! Each test gets a fresh, empty store. `sqlite` holds the few tests about opening a SQLite
//! file, which no other backend shares. One test binary keeps link time down.

mod approvals;
mod batches;
mod calls;
mod events;
mod harness;
mod restart;
mod results;
mod sessions;
mod sqlite;
