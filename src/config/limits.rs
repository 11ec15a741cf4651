//! `[limits]` settings (DESIGN §10): how much one principal, or one session, may use at once.
//! 0 means no limit, the default for each.
//!
//! Only the shape lives here. Where each is enforced, and what a caller over one gets: the
//! per-principal batch and session limits in `service::limits`, the request rate in the
//! doors' gate (`api::rate_limit`), the per-session shell limits in the shell tools
//! (`tools::shell::background`). Each is also read from `TOOLD_LIMITS_<KEY>` (the key in
//! capitals), like the other counts of [`super`].

use serde::{Deserialize, Serialize};

/// `[limits]` in the settings file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    /// Batches (whole or streamed, any door) one principal runs at once; more are refused
    /// with 429.
    pub concurrent_batches_per_principal: usize,
    /// Sessions one principal holds open on this daemon; creating more is refused with 429.
    pub sessions_per_principal: usize,
    /// Authenticated requests one principal makes per second (a token bucket holding a
    /// second's worth); more are refused with 429. Probes and the dashboard's files do not
    /// count.
    pub requests_per_second_per_principal: usize,
    /// `bash` calls one session runs at once (parallel read-only calls); more wait for a slot.
    pub shell_calls_per_session: usize,
    /// Background shells (`run_in_background`) running at once in one session; starting
    /// another is that call's error.
    pub background_shells_per_session: usize,
    /// Snapshots one principal keeps (DESIGN §12); taking another is refused with 429.
    pub snapshots_per_principal: usize,
    /// Bytes of files one principal's snapshots hold together; a snapshot taken while they
    /// hold this much or more is refused with 429.
    pub snapshot_bytes_per_principal: u64,
}
