//! What several test areas share, written once: the real daemon spawned on port 0, the
//! Postgres test server and its throwaway schemas, and test tools.

mod deferred_echo;

pub use deferred_echo::DeferredEcho;
