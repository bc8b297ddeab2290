//! Numbers and flags as models write them. Real models quote numbers often
//! (`"id": "4"`) and write flags as words (`"all_rooms": "true"`); refusing those made a
//! model tell a member it had stopped a reminder that then fired again. So every tool's
//! argument check reads integers and booleans through these, and takes what a person
//! would read as the same value: an integer, a whole float (`4.0`), or either in a string
//! (`"4"`, `" 4 "`); `true`/`false`, or those words in a string; an event id with the
//! turn note's words copied around it. Anything else is still refused, with the
//! argument's path.

use serde_json::Value;

/// The integer `v` holds, written as a number or a string.
pub fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| whole(n.as_f64()?)),
        Value::String(s) => {
            let s = s.trim();
            s.parse::<i64>().ok().or_else(|| whole(s.parse::<f64>().ok()?))
        }
        _ => None,
    }
}

/// `f` as an integer, when it is a whole number within the safe integers.
fn whole(f: f64) -> Option<i64> {
    (f.is_finite() && f.fract() == 0.0 && f.abs() <= crate::blocks::MAX_SAFE_INT as f64).then_some(f as i64)
}

/// The boolean `v` holds, written as a JSON boolean or the word in a string.
pub fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Some(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// The one event id in `text`, when a model copied the turn note's words around it
/// (`members' $abc ("Hi…")`): the only word that starts with `$`, without the punctuation
/// after it. Two such words (`$abc ("costs $5")`) are no answer.
pub fn quoted_event_id(text: &str) -> Option<&str> {
    let mut ids = text
        .split_whitespace()
        .filter(|w| w.starts_with('$'))
        .map(|w| w.trim_end_matches([',', '.', ';', ':', ')', '(', '"', '\'']));
    let id = ids.next()?;
    ids.next().is_none().then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_and_flags_are_read_as_a_person_would_read_them() {
        for (v, want) in [
            (json!(4), Some(4)),
            (json!("4"), Some(4)),
            (json!(" 12 "), Some(12)),
            (json!(4.0), Some(4)),
            (json!("4.0"), Some(4)),
            (json!(-3), Some(-3)),
            (json!(4.5), None),
            (json!("4.5"), None),
            (json!("four"), None),
            (json!("1e300"), None),
            (json!(true), None),
            (json!([4]), None),
        ] {
            assert_eq!(integer(&v), want, "{v}");
        }
        for (v, want) in [(json!(true), Some(true)), (json!("false"), Some(false)), (json!(" True "), Some(true))] {
            assert_eq!(boolean(&v), want, "{v}");
        }
        assert_eq!(boolean(&json!("yes")), None);
        assert_eq!(boolean(&json!(1)), None);
    }

    #[test]
    fn an_event_id_is_read_out_of_the_notes_words_only_when_it_is_the_only_one() {
        assert_eq!(quoted_event_id("members' $abc:x (\"What's the weather…\")"), Some("$abc:x"));
        assert_eq!(quoted_event_id("your messages $abc,"), Some("$abc"));
        assert_eq!(quoted_event_id("$abc (\"costs $5\")"), None);
        assert_eq!(quoted_event_id("the message about Porto"), None);
    }
}
