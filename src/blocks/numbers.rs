//! Matrix-safe numbers: canonical JSON allows integers within ±(2^53-1) only, and Synapse
//! rejects any float (`M_BAD_JSON "Bad JSON value: float"`), even a whole `1.0`.
//!
//! `canonicalize` rewrites a JSON value in place so that it can be sent: a whole float
//! becomes an integer, any other float its shortest round-trip decimal string without an
//! exponent. It runs over whole event contents (including `m.new_content`), not just
//! payloads. An integer outside the safe range is an error naming its path.

use serde_json::{Number, Value};

use super::error::{BlockError, index, join};

/// The largest integer Matrix accepts (2^53 - 1), and its negation the smallest.
pub const MAX_SAFE_INT: i64 = 9_007_199_254_740_991;

/// Rewrites every number in `value` into a Matrix-safe form (see the module docs).
/// `path` is the JSON path of `value` itself, used in errors.
pub fn canonicalize(value: &mut Value, path: &str) -> Result<(), BlockError> {
    // Fast pass without paths; on an error, walk again building them for the message.
    if canonicalize_fast(value).is_ok() {
        return Ok(());
    }
    canonicalize_with_paths(value, path)
}

fn canonicalize_fast(value: &mut Value) -> Result<(), ()> {
    match value {
        Value::Number(n) => {
            if let Some(new) = canonical_number(n, "").map_err(drop)? {
                *value = new;
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(canonicalize_fast),
        Value::Object(map) => map.values_mut().try_for_each(canonicalize_fast),
        _ => Ok(()),
    }
}

fn canonicalize_with_paths(value: &mut Value, path: &str) -> Result<(), BlockError> {
    match value {
        Value::Number(n) => {
            if let Some(new) = canonical_number(n, path)? {
                *value = new;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                canonicalize_with_paths(item, &index(path, i))?;
            }
            Ok(())
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                canonicalize_with_paths(v, &join(path, k))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn canonical_number(n: &Number, path: &str) -> Result<Option<Value>, BlockError> {
    if let Some(i) = n.as_i64() {
        return check_int(i as i128, path).map(|()| None);
    }
    if let Some(u) = n.as_u64() {
        return check_int(u as i128, path).map(|()| None);
    }
    let Some(f) = n.as_f64() else {
        return Err(BlockError::at(path, "is not a number Matrix can carry; use an integer or a decimal string"));
    };
    if !f.is_finite() {
        return Err(BlockError::at(path, format!("{f} is not a finite number; use a decimal string")));
    }
    if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INT as f64 {
        // Whole and safe: exact as an integer (`26.0` -> `26`, `-0.0` -> `0`).
        return Ok(Some(Value::from(f as i64)));
    }
    // Rust's `Display` for f64 is the shortest string that round-trips, never in
    // exponent form (`1e-7` -> `0.0000001`).
    Ok(Some(Value::String(format!("{f}"))))
}

fn check_int(i: i128, path: &str) -> Result<(), BlockError> {
    if i.abs() > MAX_SAFE_INT as i128 {
        Err(BlockError::at(path, format!("integer {i} is outside ±(2^53-1); send it as a decimal string like \"{i}\"")))
    } else {
        Ok(())
    }
}

/// True when any number anywhere in `value` is a float (what Synapse would reject).
pub fn has_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        _ => false,
    }
}

/// True when `s` is a decimal string the catalogue accepts where a number goes.
pub fn is_decimal_string(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits) && exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(v: Value) -> Result<Value, String> {
        let mut v = v;
        canonicalize(&mut v, "").map(|()| v).map_err(|e| e.to_string())
    }

    #[test]
    fn floats_become_integers_or_decimal_strings() {
        let cases = [
            (json!(62.99), json!("62.99")),
            (json!(26.0), json!(26)),
            (json!([0.53, 1.0]), json!(["0.53", 1])),
            (json!(-0.0), json!(0)),
            (json!(-12.5), json!("-12.5")),
            (json!(1e-7), json!("0.0000001")),
            (json!(0.53396), json!("0.53396")),
            (json!({"a": {"b": [1.5, {"c": 2.0}]}}), json!({"a": {"b": ["1.5", {"c": 2}]}})),
            (json!(9007199254740991i64), json!(9007199254740991i64)),
            (json!(-9007199254740991i64), json!(-9007199254740991i64)),
            (json!("62.99"), json!("62.99")),
        ];
        for (input, want) in cases {
            assert_eq!(canon(input.clone()), Ok(want), "input {input}");
        }
    }

    #[test]
    fn unsafe_integers_fail_with_their_path() {
        let mut v = json!({"blocks": [{"price": 9007199254740993i64}]});
        let err = canonicalize(&mut v, "").unwrap_err();
        assert_eq!(err.path, "blocks[0].price");
        assert_eq!(
            err.to_string(),
            "blocks[0].price: integer 9007199254740993 is outside ±(2^53-1); send it as a decimal string like \"9007199254740993\""
        );
        let mut v = json!([-9007199254740993i64]);
        assert_eq!(canonicalize(&mut v, "x").unwrap_err().path, "x[0]");
    }

    #[test]
    fn decimal_strings() {
        for ok in ["0", "-1", "62.99", "1e5", "1.5E-3", "-0.25e+2"] {
            assert!(is_decimal_string(ok), "{ok}");
        }
        for bad in ["", "-", "1.", ".5", "1e", "abc", "1,5", "+1", "0x10", " 1"] {
            assert!(!is_decimal_string(bad), "{bad}");
        }
    }
}
