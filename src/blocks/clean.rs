//! One-line fields made plain: after a payload passes the check, its one-line strings
//! (`Str` and `Line` fields: titles, labels, names, a file's name) lose the characters
//! that can make them read as something else (`crate::invisible`), so a file named
//! `invoice<U+202E>fdp.exe` cannot pass for a PDF in any client. Multi-line text (`Text`:
//! Markdown, code) is left as written.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::catalogue::{Field, Kind};

/// Cleans the one-line fields of a checked block.
pub fn clean_fields(fields: &[Field], obj: &mut Map<String, Value>) {
    for field in fields {
        if let Some(value) = obj.get_mut(field.name) {
            clean(&field.kind, value);
        }
    }
}

fn clean(kind: &Kind, value: &mut Value) {
    match (kind, value) {
        (Kind::Str | Kind::Line(_), Value::String(s)) => {
            if let Cow::Owned(plain) = crate::invisible::strip_deceptive(s) {
                *s = plain;
            }
        }
        (Kind::List { item, .. }, Value::Array(items)) => items.iter_mut().for_each(|v| clean(item, v)),
        (Kind::Object { fields, .. }, Value::Object(obj)) => clean_fields(fields, obj),
        (Kind::Either(first, second), value) => {
            clean(first, value);
            clean(second, value);
        }
        _ => {}
    }
}
