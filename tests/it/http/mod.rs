//! The real `toold` binary over real HTTP: each test starts the daemon on port 0 with a fresh
//! data directory and talks to it with reqwest (every endpoint, bad input, SSE resume,
//! idempotency, interrupts, restarts, `kill -9`, auth, the gates (429, 408, 503), the ops
//! endpoints (`/openapi.json`, `/metrics`) and scheduling judged from persisted events).

pub mod approvals;
pub mod audit;
mod audit_export;
pub mod bad_input;
mod batches;
mod contract;
mod defects;
mod endpoints;
mod events;
mod gates;
/// Also the fleet tests' daemon.
pub mod harness;
mod lifecycle;
mod ops;
mod sandbox_hooks;
mod scheduling;
mod unknown_fields;
