//! `requests_per_second_per_principal` (DESIGN §10): a token bucket per principal, checked by
//! the gate right after it knows who is calling, so it holds for every door alike.
//!
//! Decisions (DESIGN is silent):
//! - What counts: every request the gate authenticates, whichever door (HTTP, SSE, gRPC, MCP);
//!   not the probes (`/healthz`, `/readyz`, gRPC health) nor the dashboard's static files,
//!   which pass the gate without a principal. A request refused for its rate takes no
//!   load-shedding permit. A streamed RPC or SSE subscription counts once, when it opens.
//! - The bucket holds a second's worth of tokens (`rate`), refilled continuously: a principal
//!   may burst to its rate, then goes at its rate. Over it: `limit_exceeded` (429 with
//!   `Retry-After: 1`, gRPC `RESOURCE_EXHAUSTED` with `retry-after: 1` metadata); a token is
//!   back within `1/rate` s ≤ 1 s.
//! - Per daemon: a fleet of N daemons lets a principal N times the rate, and a request
//!   forwarded to the daemon that runs its session (`api::forward`) counts at both, since
//!   each gate authenticates it.
//! - 0 = no limit: [`RateLimiter::admit`] returns at once, with no lock and no allocation.
//!   A principal's bucket is made on its first request and kept (principals are the
//!   configured tokens' names, a bounded set).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::permission::Principal;
use crate::service::{ErrorCode, ServiceError};

/// Every principal's bucket.
#[derive(Debug, Default)]
pub struct RateLimiter {
    /// Requests per second each principal may make; 0: no limit.
    rate: usize,
    buckets: Mutex<HashMap<Arc<str>, Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl RateLimiter {
    pub fn new(requests_per_second: usize) -> RateLimiter {
        RateLimiter {
            rate: requests_per_second,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token of `caller`'s bucket, or refuses with `limit_exceeded`.
    pub fn admit(&self, caller: &Principal) -> Result<(), ServiceError> {
        if self.rate == 0 {
            return Ok(());
        }
        self.admit_at(caller, Instant::now())
    }

    /// [`RateLimiter::admit`] at `now` (tests pass their own clock).
    fn admit_at(&self, caller: &Principal, now: Instant) -> Result<(), ServiceError> {
        let rate = self.rate as f64;
        // Each step under this lock is arithmetic on one bucket; a panic cannot leave it
        // half-done.
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets.entry(caller.name.clone()).or_insert(Bucket {
            tokens: rate,
            refilled_at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled_at);
        bucket.tokens = (bucket.tokens + elapsed.as_secs_f64() * rate).min(rate);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        Err(ServiceError::new(
            ErrorCode::LimitExceeded,
            format!(
                "principal \"{}\" is over its request rate (limits.\
                 requests_per_second_per_principal = {}); retry in a second",
                caller.name, self.rate
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::permission::Role;

    #[test]
    fn a_principal_bursts_to_its_rate_then_waits_for_tokens() {
        let limiter = RateLimiter::new(3);
        let a = Principal::new("a", Role::Agent);
        let start = Instant::now();
        for _ in 0..3 {
            limiter.admit_at(&a, start).unwrap();
        }
        let refused = limiter.admit_at(&a, start).unwrap_err();
        assert_eq!(refused.code, ErrorCode::LimitExceeded);
        assert!(
            refused.message.contains("\"a\"")
                && refused
                    .message
                    .contains("requests_per_second_per_principal = 3"),
            "{}",
            refused.message
        );
        // A third of a second brings one token back, not two.
        let later = start + Duration::from_millis(334);
        limiter.admit_at(&a, later).unwrap();
        assert!(limiter.admit_at(&a, later).is_err());
        // A long pause refills to a second's worth, no more.
        let much_later = later + Duration::from_secs(60);
        for _ in 0..3 {
            limiter.admit_at(&a, much_later).unwrap();
        }
        assert!(limiter.admit_at(&a, much_later).is_err());
    }

    #[test]
    fn one_principal_over_its_rate_does_not_limit_another() {
        let limiter = RateLimiter::new(1);
        let (a, b) = (
            Principal::new("a", Role::Agent),
            Principal::new("b", Role::Agent),
        );
        let now = Instant::now();
        limiter.admit_at(&a, now).unwrap();
        assert!(limiter.admit_at(&a, now).is_err());
        limiter.admit_at(&b, now).unwrap();
    }

    #[test]
    fn without_a_rate_nothing_is_counted() {
        let limiter = RateLimiter::new(0);
        let a = Principal::new("a", Role::Agent);
        for _ in 0..1000 {
            limiter.admit(&a).unwrap();
        }
        assert!(limiter.buckets.lock().unwrap().is_empty());
    }
}
