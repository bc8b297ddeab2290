//! Reading a block's fields for display, defensively: a display block may carry fields
//! of any shape (extra fields are allowed, and loading is lenient), so every read gives
//! `None` for what is missing or of another kind rather than failing.

use serde_json::{Map, Value};

pub type Fields = Map<String, Value>;

/// A non-empty string field.
pub fn text<'a>(f: &'a Fields, key: &str) -> Option<&'a str> {
    f.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// A number as written: an integer or a decimal string.
pub fn number(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if crate::blocks::is_decimal_string(s) => Some(s.clone()),
        _ => None,
    }
}

/// A number field.
pub fn num(f: &Fields, key: &str) -> Option<String> {
    f.get(key).and_then(number)
}

/// An array field (empty when missing).
pub fn list<'a>(f: &'a Fields, key: &str) -> &'a [Value] {
    f.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// An object, as fields (empty when it is not one).
pub fn object(v: &Value) -> Fields {
    v.as_object().cloned().unwrap_or_default()
}

/// A table cell or any scalar, as text.
pub fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_owned(),
        Value::Null => String::new(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_owned(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

/// A byte count as members read it: "1.5 MB".
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1000.0;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
