//! What an approval notice shows of a call's arguments, so that it cannot be blind. Pure.
//!
//! A model (steered by a tool result, or by a member) can pad one argument so that a cut
//! of the whole hides the one that matters, or hide text behind bidi overrides and
//! zero-width characters. So: every key is listed first, then each value on a line of its
//! own (nested ones by their path), each value cut on its own, keeping its head and its
//! tail, with the cut said; invisible and direction-changing characters are shown as
//! `\uXXXX` escapes. No key is ever left out: arguments that would not fit one notice
//! whole are refused ([`TooLong`]), never shown in part.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Characters of a value kept before and after its cut.
const HEAD: usize = 160;
const TAIL: usize = 80;
/// Values (leaves) shown at most.
const MAX_VALUES: usize = 64;
/// Characters shown at most, all lines together.
const MAX_SHOWN: usize = 6_000;
/// Objects and arrays nested deeper than this are shown as one value.
const MAX_DEPTH: usize = 6;

/// The arguments cannot all be shown in one notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLong;

/// The arguments as the notice shows them.
pub fn shown(args: &Value) -> Result<String, TooLong> {
    let mut leaves = Vec::new();
    flatten(String::new(), args, 0, &mut leaves);
    if leaves.len() > MAX_VALUES {
        return Err(TooLong);
    }
    let mut lines = Vec::with_capacity(leaves.len() + 1);
    match args {
        Value::Object(map) if !map.is_empty() => {
            lines.push(format!("keys: {}", map.keys().map(|k| segment(k)).collect::<Vec<_>>().join(", ")));
        }
        Value::Object(_) | Value::Null => return Ok("(no arguments)".to_owned()),
        _ => {}
    }
    lines.extend(leaves.into_iter().map(|(path, value)| format!("{path} = {}", cut(&escape(&value)))));
    let text = lines.join("\n");
    if text.chars().count() > MAX_SHOWN {
        return Err(TooLong);
    }
    Ok(text)
}

/// The hash a decision is bound to: of the tool's name and exactly what was shown.
pub fn hash(tool: &str, shown: &str) -> String {
    let digest = Sha256::digest(format!("{tool}\n{shown}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every leaf of `value` under `path`, as (path, compact JSON).
fn flatten(path: String, value: &Value, depth: usize, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) if !map.is_empty() && depth < MAX_DEPTH => {
            for (k, v) in map {
                let p = if path.is_empty() { segment(k) } else { format!("{path}.{}", segment(k)) };
                flatten(p, v, depth + 1, out);
            }
        }
        Value::Array(items) if !items.is_empty() && depth < MAX_DEPTH => {
            for (i, v) in items.iter().enumerate() {
                flatten(format!("{path}[{i}]"), v, depth + 1, out);
            }
        }
        _ => out.push((if path.is_empty() { "(value)".to_owned() } else { path }, value.to_string())),
    }
}

/// A key as a path segment: bare when it is a plain name, else a JSON string (escaped).
fn segment(key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain { key.to_owned() } else { escape(&Value::String(key.to_owned()).to_string()) }
}

/// A value cut to its head and tail, with the cut said.
fn cut(text: &str) -> String {
    let n = text.chars().count();
    if n <= HEAD + TAIL + 40 {
        return text.to_owned();
    }
    let head: String = text.chars().take(HEAD).collect();
    let tail: String = text.chars().skip(n - TAIL).collect();
    format!("{head} … ({} characters cut) … {tail}", n - HEAD - TAIL)
}

/// JSON text with invisible and bidi characters as `\uXXXX` escapes (still valid JSON).
fn escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if crate::invisible::is_invisible(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_padded_argument_cannot_hide_another_key() {
        let args = json!({"note": "x".repeat(720), "path": "/srv/share/payroll-2026.xlsx"});
        let text = shown(&args).expect("shown");
        assert!(text.starts_with("keys: note, path\n"), "{text}");
        assert!(text.contains("path = \"/srv/share/payroll-2026.xlsx\""), "{text}");
        assert!(text.contains("(482 characters cut)"), "{text}");
        // A long value keeps its end: a path padded at the front still shows its file.
        let padded = json!({"path": format!("/srv/{}/payroll.xlsx", "a/".repeat(400))});
        assert!(shown(&padded).expect("shown").contains("payroll.xlsx\""));
    }

    #[test]
    fn nested_values_are_shown_by_their_path_and_odd_keys_quoted() {
        let args = json!({"opts": {"force": true, "to": ["a", "b"]}, "a b": 1, "": null});
        let text = shown(&args).expect("shown");
        for line in ["opts.force = true", "opts.to[0] = \"a\"", "opts.to[1] = \"b\"", "\"a b\" = 1", "\"\" = null"] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
        assert_eq!(shown(&json!({})), Ok("(no arguments)".to_owned()));
    }

    #[test]
    fn bidi_and_zero_width_characters_are_shown_as_escapes() {
        let args = json!({"path": "/tmp/\u{202E}fdp.exe", "k\u{200B}ey": "a\u{2066}b\u{FEFF}"});
        let text = shown(&args).expect("shown");
        assert!(text.contains("/tmp/\\u202Efdp.exe"), "{text}");
        assert!(text.contains("\"k\\u200Bey\" = \"a\\u2066b\\uFEFF\""), "{text}");
        assert!(!text.chars().any(crate::invisible::is_invisible), "{text:?}");
    }

    #[test]
    fn arguments_too_many_or_too_long_to_show_are_refused_not_cut() {
        let many: serde_json::Map<String, Value> = (0..65).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(shown(&Value::Object(many)), Err(TooLong));
        let long_keys: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("{i}{}", "k".repeat(200)), json!(1))).collect();
        assert_eq!(shown(&Value::Object(long_keys)), Err(TooLong));
    }

    #[test]
    fn the_hash_changes_with_anything_shown() {
        let a = hash("files__delete", "path = \"a\"");
        assert_eq!(a.len(), 64);
        assert_ne!(a, hash("files__delete", "path = \"b\""));
        assert_ne!(a, hash("files__remove", "path = \"a\""));
    }
}
