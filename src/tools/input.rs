//! Reading tool inputs the same way in every tool family.
//!
//! The schema has already checked types when a call comes through the dispatcher; these
//! helpers guard tools run without one and give the same answer everywhere for the forms the
//! schema lets through. In particular JSON Schema counts `3.0` as an integer, so every tool
//! accepts a whole-number float where it accepts an integer.

use serde_json::Value;

use crate::tool::ToolError;

/// `value` as a non-negative whole number: an unsigned integer, or a float with no fractional
/// part that fits in `u64`.
pub fn whole_number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
            .map(|f| f as u64)
    })
}

/// `input[field]` as an optional non-negative whole number; absent or `null` is `None`.
pub fn optional_whole_number(input: &Value, field: &str) -> Result<Option<u64>, ToolError> {
    match input.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => whole_number(value).map(Some).ok_or_else(|| {
            ToolError::Validation(format!(
                "\"{field}\" must be a non-negative whole number, not {value}"
            ))
        }),
    }
}

/// `input[field]` as a string.
pub fn string_field<'a>(input: &'a Value, field: &str) -> Result<&'a str, ToolError> {
    input
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Validation(format!("\"{field}\" must be a string")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn whole_numbers_in_every_form_the_schema_accepts() {
        for (value, expected) in [
            (json!(3), Some(3)),
            (json!(3.0), Some(3)),
            (json!(0), Some(0)),
            (json!(-1), None),
            (json!(2.5), None),
            (json!(1e30), None),
            (json!("3"), None),
            (json!(null), None),
        ] {
            assert_eq!(whole_number(&value), expected, "{value}");
        }
        let input = json!({"n": 4.0, "bad": -2, "s": "x"});
        assert_eq!(optional_whole_number(&input, "n").unwrap(), Some(4));
        assert_eq!(optional_whole_number(&input, "missing").unwrap(), None);
        let err = optional_whole_number(&input, "bad").unwrap_err();
        assert!(
            err.message().contains("\"bad\"") && err.message().contains("-2"),
            "{err}"
        );
        assert_eq!(string_field(&input, "s").unwrap(), "x");
        assert!(string_field(&input, "n").is_err());
    }
}
