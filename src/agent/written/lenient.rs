//! JSON as small models write it: a template's doubled braces, quotes escaped as if
//! inside a string, several objects in a row, and a rich message's payload written in
//! place of its arguments, a rich message inside arguments broken elsewhere. Read
//! leniently, and only where strict reading failed.

use serde_json::{Map, Value};

/// The JSON in `body`, as written, with the doubled braces of a template undone, or with
/// its quotes unescaped.
pub(super) fn json(body: &str) -> Option<Value> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    let undoubled = body.replace("{{", "{").replace("}}", "}");
    if let Ok(v) = serde_json::from_str::<Value>(&undoubled) {
        return Some(v);
    }
    // Quotes escaped as if inside a string (`{\"payload\": …}`), some or all of them.
    if let Ok(v) = serde_json::from_str::<Value>(&body.replace("\\\"", "\"")) {
        return Some(v);
    }
    // Several objects one after another (one per line, as some models list calls).
    let many: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(body).into_iter::<Value>().collect();
    if let Some(many) = many.ok().filter(|v| v.len() > 1) {
        return Some(Value::Array(many));
    }
    // A doubled opening brace whose closing ones were not all doubled (`{{"name": …}}`
    // with one brace too many, as Qwen copies its template): closed.
    let open = undoubled.matches('{').count().saturating_sub(undoubled.matches('}').count());
    (body.starts_with("{{") && (1..=2).contains(&open))
        .then(|| serde_json::from_str::<Value>(&format!("{undoubled}{}", "}".repeat(open))).ok())
        .flatten()
}

/// A rich message's arguments with its payload written in place of them (`{"name":
/// "rich_send", "arguments": {"v": 1, "blocks": […]}}`, as Qwen2.5-Coder wrote a table in
/// the benchmark) put under `payload`, beside the arguments that are `rich_send`'s own.
/// Anything else as written.
pub(super) fn payload_wrapped(name: &str, arguments: Value) -> Value {
    let Value::Object(mut fields) = arguments else { return arguments };
    let inline = fields.get("blocks").is_some_and(Value::is_array) && !fields.contains_key("payload");
    if !inline || !matches!(name, super::RICH_SEND | "rich_edit") {
        return Value::Object(fields);
    }
    let mut payload = Map::new();
    for key in ["v", "blocks"] {
        if let Some(v) = fields.remove(key) {
            payload.insert(key.to_owned(), v);
        }
    }
    fields.insert("payload".to_owned(), Value::Object(payload));
    Value::Object(fields)
}

/// A rich message's payload (and fallback) read out of arguments whose JSON is broken
/// elsewhere: Qwen2.5-Coder-1.5B, asked for a countdown in the benchmark, copied the turn
/// note's id list, quotes and all, into `thread`, and wrote a valid `payload` after it.
/// The first `"payload"` value that parses on its own and has `blocks`, with the
/// `"fallback"` string when that parses too.
pub(super) fn salvaged_message(body: &str) -> Option<Value> {
    let payload = value_after(body, "\"payload\"").filter(|p| p.get("blocks").is_some_and(Value::is_array))?;
    let mut args = Map::new();
    args.insert("payload".to_owned(), payload);
    if let Some(fallback) = value_after(body, "\"fallback\"").filter(Value::is_string) {
        args.insert("fallback".to_owned(), fallback);
    }
    Some(Value::Object(args))
}

/// The JSON value after the first `key:` in `body` that has one.
fn value_after(body: &str, key: &str) -> Option<Value> {
    body.match_indices(key).find_map(|(at, _)| {
        let rest = body[at + key.len()..].trim_start().strip_prefix(':')?;
        serde_json::Deserializer::from_str(rest).into_iter::<Value>().next()?.ok()
    })
}
