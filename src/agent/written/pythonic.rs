//! A call written as a Python call, the whole answer: `countdown(until="2027-01-01")`,
//! `rich_send(payload={"blocks": […]})`. Small models write a call so when their template
//! shows tools as functions (Qwen2.5-Coder-1.5B, the answers benchmark). Read only when
//! the whole answer (or a fence that is the whole answer) is one call of a name the turn
//! knows, an offered tool or a block type, with `key=value` arguments whose values are
//! JSON (Python's `True`, `False` and `None` too); prose that shows a call among other
//! words is prose.

use serde_json::{Map, Value};

/// What the whole of `text` is, as a Python call of a name `known` takes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Pythonic {
    /// Not a call of a known name.
    No,
    /// The call: its name and its arguments as a JSON object.
    Call(String, Value),
    /// A call of a known name whose arguments cannot be read.
    Unreadable,
}

/// Reads `text` as one Python call of a name `known` says is a tool or a block.
pub(super) fn read(text: &str, known: impl Fn(&str) -> bool) -> Pythonic {
    let body = unfenced(text.trim());
    let Some(open) = body.find('(') else { return Pythonic::No };
    let name = &body[..open];
    let is_name = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_alphabetic());
    if !is_name || !known(name) || !call_shaped(&body[open + 1..]) {
        return Pythonic::No;
    }
    let Some(inner) = body[open + 1..].trim_end().trim_end_matches(';').trim_end().strip_suffix(')') else {
        return Pythonic::Unreadable;
    };
    match arguments(inner) {
        Some(arguments) => Pythonic::Call(name.to_owned(), Value::Object(arguments)),
        None => Pythonic::Unreadable,
    }
}

/// Whether what follows `name(` starts as readable arguments do: `)` or `key=`. A
/// positional argument (`file("data.txt")`, as code in an answer may be) could never be
/// read as a call, so it is prose, not a correction; so is `table(s) are handy`.
fn call_shaped(rest: &str) -> bool {
    let rest = rest.trim_start();
    let ident = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
    rest.starts_with(')') || (ident > 0 && rest[ident..].trim_start().starts_with('='))
}

/// Whether `text`, the start of an answer being written, may become a Python call of
/// one of `names`: held back until it is seen to be prose.
pub(super) fn may_become(text: &str, names: &[&str]) -> bool {
    let body = text.trim_start();
    let body = body.strip_prefix("```python").or_else(|| body.strip_prefix("```")).unwrap_or(body).trim_start();
    match body.find('(') {
        Some(open) => {
            let rest = &body[open + 1..];
            names.contains(&&body[..open]) && (rest.trim().is_empty() || call_shaped(rest))
        }
        // A name still being typed.
        None => !body.is_empty() && names.iter().any(|n| n.starts_with(body)),
    }
}

/// `text` without the fence around it, when a fence (```` ``` ````, ```` ```python ````) is
/// all of it.
fn unfenced(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let Some(body) = rest.strip_suffix("```") else { return text };
    let first_line = body.find('\n').map_or(body.len(), |at| at);
    let language = body[..first_line].trim();
    if !(language.is_empty() || language.eq_ignore_ascii_case("python") || language.eq_ignore_ascii_case("py")) {
        return text;
    }
    body[first_line..].trim()
}

/// `key=value, …` as a JSON object; `None` when any part is not that.
fn arguments(mut rest: &str) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return Some(out);
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let (value, len) = value(rest[eq + 1..].trim_start())?;
        let after = rest[eq + 1..].trim_start();
        out.insert(key.to_owned(), value);
        rest = after[len..].trim_start();
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None if rest.is_empty() => return Some(out),
            None => return None,
        }
    }
}

/// One value at the start of `text` and its length: JSON, or Python's constants.
fn value(text: &str) -> Option<(Value, usize)> {
    for (word, value) in [("True", Value::Bool(true)), ("False", Value::Bool(false)), ("None", Value::Null)] {
        if text.starts_with(word) && !text[word.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            return Some((value, word.len()));
        }
    }
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    match values.next() {
        Some(Ok(value)) => Some((value, values.byte_offset())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn known(name: &str) -> bool {
        ["rich_send", "countdown", "schedule"].contains(&name)
    }

    #[test]
    fn a_whole_answer_that_is_a_python_call_of_a_known_name_is_that_call() {
        assert_eq!(
            read("countdown(until=\"2027-01-01T00:00:00Z\")", known),
            Pythonic::Call("countdown".into(), json!({"until": "2027-01-01T00:00:00Z"}))
        );
        let sent = "```python\nrich_send(payload={\"blocks\": [{\"type\": \"code\", \"code\": \"x = f(a, b)\"}]}, \
                    fallback=\"x = f(a, b)\")\n```";
        assert_eq!(
            read(sent, known),
            Pythonic::Call(
                "rich_send".into(),
                json!({"payload": {"blocks": [{"type": "code", "code": "x = f(a, b)"}]}, "fallback": "x = f(a, b)"})
            )
        );
        assert_eq!(
            read(" schedule(at=\"in 2 minutes\", message=\"Stretch!\", all_rooms=False, tz=None); ", known),
            Pythonic::Call(
                "schedule".into(),
                json!({"at": "in 2 minutes", "message": "Stretch!", "all_rooms": false, "tz": null})
            )
        );
        assert_eq!(read("schedule()", known), Pythonic::Call("schedule".into(), json!({})));
    }

    #[test]
    fn an_answer_that_may_become_a_call_is_held_back_until_it_is_prose() {
        let names = ["countdown", "rich_send"];
        for held in ["count", "countdown", "countdown(", "countdown(until=\"20", "```python\nrich_send(payload={"] {
            assert!(may_become(held, &names), "{held}");
        }
        for shown in ["Sure", "countdown is", "counting(x=1)", "countdown(s) are", "The countdown"] {
            assert!(!may_become(shown, &names), "{shown}");
        }
    }

    #[test]
    fn prose_code_and_unknown_names_are_not_calls_and_a_broken_call_is_unreadable() {
        for prose in [
            "Use countdown(until=\"2027\") to show it.",
            "def reverse(s):\n    return s[::-1]",
            "print(\"hello\")",
            "reverse_string(\"abc\")",
            "```rust\ncountdown(until=\"2027\")\n```",
            "countdown is a block",
            "countdown(s) are handy",
            "countdown(\"2027-01-01\")",
        ] {
            assert_eq!(read(prose, known), Pythonic::No, "{prose}");
        }
        for broken in
            ["countdown(until='2027-01-01')", "rich_send(payload={\"blocks\": [", "countdown(until=\"2027\") and more"]
        {
            assert_eq!(read(broken, known), Pythonic::Unreadable, "{broken}");
        }
    }
}
