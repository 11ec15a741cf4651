//! Conversions between the store's Rust types and column values that every SQL backend
//! shares: times as integer milliseconds since the Unix epoch (negative before it), unsigned
//! counts as signed 64-bit integers (refused when they do not fit), JSON as text.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;

/// Milliseconds since the epoch, truncated towards the past, saturating far outside the
/// representable range.
pub fn millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        // Before the epoch: round away from it so truncation is always towards the past.
        Err(before) => {
            let before = before.duration();
            let whole = i64::try_from(before.as_millis()).unwrap_or(i64::MAX);
            let partial = i64::from(before.subsec_nanos() % 1_000_000 != 0);
            -whole.saturating_add(partial)
        }
    }
}

/// The time `millis` milliseconds from the epoch.
pub fn time(millis: i64) -> SystemTime {
    let magnitude = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

pub fn optional_time(millis: Option<i64>) -> Option<SystemTime> {
    millis.map(time)
}

/// An unsigned count as SQLite's signed integer; `what` names the value in the error.
pub fn to_i64<T>(value: T, what: &str) -> Result<i64, StoreError>
where
    T: TryInto<i64> + Copy + std::fmt::Display,
{
    value
        .try_into()
        .map_err(|_| StoreError::Invalid(format!("{what} {value} is too large to store")))
}

/// A stored integer back as an unsigned count; a negative one means the row is corrupt.
pub fn from_i64<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} {value} is out of range")))
}

/// JSON text for a value. Serialising the crate's own types cannot fail in practice (no
/// non-string map keys, no failing `Serialize` impls); a failure is still reported, not
/// unwrapped.
pub fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|err| StoreError::Invalid(format!("{what} cannot be serialised: {err}")))
}

pub fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| {
        let shown: String = text.chars().take(80).collect();
        StoreError::Corrupt(format!("{what} is not valid JSON ({err}): {shown:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_millisecond_towards_the_past() {
        let now = SystemTime::now();
        let back = time(millis(now));
        assert!(back <= now && now.duration_since(back).unwrap() < Duration::from_millis(1));
        assert_eq!(millis(UNIX_EPOCH), 0);
        let before = UNIX_EPOCH - Duration::from_micros(1500);
        assert_eq!(millis(before), -2);
        assert_eq!(time(-2), UNIX_EPOCH - Duration::from_millis(2));
    }

    #[test]
    fn counts_out_of_range_name_the_value() {
        assert_eq!(to_i64(5u64, "seq").unwrap(), 5);
        let err = to_i64(u64::MAX, "seq").unwrap_err().to_string();
        assert!(err.contains("seq 18446744073709551615"), "{err}");
        let err = from_i64::<u64>(-1, "total_chars").unwrap_err().to_string();
        assert!(err.contains("total_chars -1"), "{err}");
    }
}
