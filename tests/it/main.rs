//! The integration tests, as one test binary: every area is a module here, so the whole
//! dependency tree is linked once instead of once per area (on a 2-core machine the links
//! were most of the tests' build time). `support/` holds what several areas share: the
//! daemon spawned on port 0, the Postgres test server and its throwaway schemas, test tools.
//!
//! Tests run on parallel threads of this one process, so none may change process-wide state
//! (the environment, the current directory, signal dispositions): a test that needs a
//! different environment runs in a child process (`support::child_process`).
//!
//! `tests/offload_memory/` stays a binary of its own: it counts every heap allocation of its
//! process with a global allocator, which other tests running beside it would disturb.

mod support;

mod agent;
mod architecture;
mod auth;
mod client;
mod crash;
mod dispatch;
mod environment;
mod files;
mod fleet;
mod grpc;
mod hooks;
mod http;
mod limits;
mod mcp;
mod mcp_bridge;
mod metrics;
mod misc;
mod oidc;
mod providers;
mod search;
mod service;
mod shell;
mod store;
mod telemetry;
mod tls;
mod ui;
mod workspace;
