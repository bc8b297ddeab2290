//! The engine that checks a block against its catalogue row. It walks the row's field
//! kinds; the few rules that span fields are small functions named in the row (`extra`,
//! in `rules.rs`).

use serde_json::{Map, Value};

use super::catalogue::{BlockSpec, Field, Kind, MAX_STR, MAX_TEXT};
use super::error::{index, join};
use super::numbers::{MAX_SAFE_INT, is_decimal_string};
use super::rules::{Failure, cut, is_button_id, is_date_time, is_mxc, is_web_url};

fn fail<T>(path: &Path<'_>, message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure { path: path.render(), message: message.into() })
}

/// A JSON path built lazily: rendered only when a check fails, so a valid payload costs
/// no path strings.
#[derive(Debug, Clone, Copy)]
enum Path<'a> {
    Root(&'a str),
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn render(&self) -> String {
        match self {
            Path::Root(p) => (*p).to_owned(),
            Path::Key(parent, key) => join(&parent.render(), key),
            Path::Index(parent, i) => index(&parent.render(), *i),
        }
    }
}

/// Checks the block object `block` (at `path`) against `spec`.
pub fn check_block(spec: &BlockSpec, block: &Map<String, Value>, index: usize) -> Result<(), Failure> {
    let blocks = Path::Root("blocks");
    check_fields(spec.fields, spec.strict, block, &Path::Index(&blocks, index), &["type", "v"])?;
    match spec.extra {
        Some(extra) => extra(block, &format!("blocks[{index}]")),
        None => Ok(()),
    }
}

fn check_fields(
    fields: &[Field],
    strict: bool,
    obj: &Map<String, Value>,
    path: &Path<'_>,
    always_allowed: &[&str],
) -> Result<(), Failure> {
    for field in fields {
        match obj.get(field.name) {
            None | Some(Value::Null) if field.required => {
                return fail(path, format!("missing required field \"{}\"", field.name));
            }
            None | Some(Value::Null) => {}
            Some(value) => check_kind(&field.kind, value, &Path::Key(path, field.name))?,
        }
    }
    if strict
        && let Some(unknown) =
            obj.keys().find(|k| !always_allowed.contains(&k.as_str()) && !fields.iter().any(|f| f.name == k.as_str()))
    {
        let allowed: Vec<&str> = fields.iter().map(|f| f.name).collect();
        return fail(path, format!("unknown field \"{}\" (allowed: {})", cut(unknown, 40), allowed.join(", ")));
    }
    Ok(())
}

fn check_kind(kind: &Kind, value: &Value, path: &Path<'_>) -> Result<(), Failure> {
    match kind {
        Kind::Str => {
            let s = string(value, path, "a non-empty string")?;
            if s.trim().is_empty() {
                return fail(path, "must be a non-empty string");
            }
            max_chars(s, MAX_STR, path)
        }
        Kind::Text => max_chars(string(value, path, "a string")?, MAX_TEXT, path),
        Kind::Line(max) => {
            let s = string(value, path, "a string")?;
            let n = s.chars().count();
            if n == 0 || n > *max || s.contains(['\n', '\r']) {
                return fail(path, format!("must be one line of 1-{max} characters"));
            }
            Ok(())
        }
        Kind::Num => match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => safe_int(value, path),
            Value::Number(_) => fail(path, "must be an integer or a decimal string (floats are canonicalized first)"),
            Value::String(s) if is_decimal_string(s) => Ok(()),
            _ => fail(
                path,
                format!("must be a number: an integer or a decimal string like \"62.99\" (got {})", describe(value)),
            ),
        },
        Kind::Int => match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => safe_int(value, path),
            _ => fail(path, format!("must be an integer (got {})", describe(value))),
        },
        Kind::Bool => match value {
            Value::Bool(_) => Ok(()),
            _ => fail(path, format!("must be true or false (got {})", describe(value))),
        },
        Kind::Url => {
            let s = string(value, path, "a URL")?;
            if !is_web_url(s) && !is_mxc(s) {
                return fail(
                    path,
                    "must be an http(s) or mxc:// URL: a host, then only URL characters (no spaces, quotes or angle brackets; encode them as %XX)",
                );
            }
            max_chars(s, MAX_STR, path)
        }
        Kind::Mxc => {
            if !is_mxc(string(value, path, "an mxc:// URL")?) {
                return fail(path, "must be an mxc://server/id URL (upload the media first)");
            }
            Ok(())
        }
        Kind::Time => {
            if !is_date_time(string(value, path, "a date-time")?) {
                return fail(path, "must be an ISO 8601 date-time like \"2026-12-01T18:00:00Z\"");
            }
            Ok(())
        }
        Kind::Id => {
            let s = string(value, path, "an id")?;
            if !is_button_id(s) {
                return fail(path, "must be 1-64 characters of A-Z a-z 0-9 _ . : -");
            }
            Ok(())
        }
        Kind::OneOf(options) => {
            let s = string(value, path, "a string")?;
            if !options.contains(&s) {
                return fail(path, format!("must be one of {} (got \"{}\")", quoted(options), cut(s, 40)));
            }
            Ok(())
        }
        Kind::Scalar => match value {
            Value::String(s) => max_chars(s, MAX_STR, path),
            Value::Number(_) => safe_int_or_decimal(value, path),
            Value::Bool(_) | Value::Null => Ok(()),
            _ => fail(path, format!("must be a string or a number (got {})", describe(value))),
        },
        Kind::List { item, min, max } => {
            let Value::Array(items) = value else {
                return fail(path, format!("must be an array (got {})", describe(value)));
            };
            if items.len() < *min || items.len() > *max {
                let range = if min == max { format!("{min}") } else { format!("{min}-{max}") };
                return fail(path, format!("must have {range} items (got {})", items.len()));
            }
            for (i, v) in items.iter().enumerate() {
                check_kind(item, v, &Path::Index(path, i))?;
            }
            Ok(())
        }
        Kind::Object { fields, strict } => match value {
            Value::Object(obj) => check_fields(fields, *strict, obj, path, &[]),
            _ => fail(path, format!("must be an object (got {})", describe(value))),
        },
        Kind::Either(first, second) => {
            if check_kind(first, value, path).is_ok() {
                Ok(())
            } else {
                check_kind(second, value, path)
            }
        }
    }
}

fn string<'a>(value: &'a Value, path: &Path<'_>, what: &str) -> Result<&'a str, Failure> {
    match value {
        Value::String(s) => Ok(s),
        _ => fail(path, format!("must be {what} (got {})", describe(value))),
    }
}

fn max_chars(s: &str, max: usize, path: &Path<'_>) -> Result<(), Failure> {
    // Byte length bounds char count from above: skip the count for short strings.
    if s.len() > max && s.chars().count() > max {
        return fail(path, format!("must be at most {max} characters (got {})", s.chars().count()));
    }
    Ok(())
}

fn safe_int(value: &Value, path: &Path<'_>) -> Result<(), Failure> {
    let big = value.as_i64().map(|i| i.unsigned_abs()).or(value.as_u64()).unwrap_or(u64::MAX);
    if big > MAX_SAFE_INT as u64 {
        return fail(
            path,
            format!("integer {value} is outside ±(2^53-1); send it as a decimal string like \"{value}\""),
        );
    }
    Ok(())
}

fn safe_int_or_decimal(value: &Value, path: &Path<'_>) -> Result<(), Failure> {
    match value {
        Value::Number(n) if n.is_f64() => fail(path, "must be an integer or a decimal string"),
        _ => safe_int(value, path),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn quoted(options: &[&str]) -> String {
    options.iter().map(|o| format!("\"{o}\"")).collect::<Vec<_>>().join(", ")
}
