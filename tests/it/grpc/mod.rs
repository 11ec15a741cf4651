//! The real `toold` binary over real gRPC (h2c on the HTTP listener): each test starts the
//! daemon on port 0 with a fresh data directory and talks to it with the tonic client
//! generated from `proto/toold/v1/toold.proto` (every RPC, the `Execute` stream fed call by
//! call, `Subscribe` with filters and resume, files in and out, snapshots and forks, bad input,
//! auth, health and reflection).

mod approvals;
mod bad_input;
mod doors;
mod events;
mod execute;
pub mod files;
pub mod harness;
mod listener;
mod rpcs;
mod snapshots;
