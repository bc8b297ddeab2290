//! Arguments written with no call around them: a rich message's payload alone (maybe
//! with its fallback beside the blocks), its arguments without a name, or the arguments
//! of the one offered tool whose keys they are exactly.

use serde_json::Value;

use super::ToolSpec;

/// The tool a rich message's payload alone is meant for.
pub(super) const RICH_SEND: &str = "rich_send";

/// Whether `item` is a rich message's payload (`{"v": 1, "blocks": […]}`) with nothing
/// else but maybe its fallback (`"fallback": "…"`, as small models flatten `rich_send`'s
/// arguments): what `rich_send` takes.
pub(super) fn bare_payload(item: &Value) -> bool {
    item.as_object().is_some_and(|o| {
        o.get("blocks").and_then(Value::as_array).is_some_and(|b| b.iter().all(|b| b.get("type").is_some()))
            && o.get("fallback").is_none_or(Value::is_string)
            && o.keys().all(|k| k == "v" || k == "blocks" || k == "fallback")
    })
}

/// Whether `item` is a rich message's arguments (`{"payload": {"blocks": …}, …}`): bare
/// arguments no answer shows by chance, read as a call even with prose around them
/// ("Here is the chart: {"payload": …}"). Other bare arguments are a call only alone.
pub(super) fn rich_message(item: &Value) -> bool {
    item.get("payload").and_then(|p| p.get("blocks")).is_some_and(Value::is_array)
}

/// Whether the text around `span` names `tool` as a word ("use the `schedule` function
/// with: ```json {…}```"): bare arguments of the tool it names are its call.
pub(super) fn mentioned(text: &str, span: &std::ops::Range<usize>, tool: &str) -> bool {
    let word = |part: &str| {
        part.match_indices(tool).any(|(at, _)| {
            let before = part[..at].chars().next_back();
            let after = part[at + tool.len()..].chars().next();
            let joins = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !joins(before) && !joins(after)
        })
    };
    word(&text[..span.start]) || word(&text[span.end..])
}

/// An object whose keys are exactly one offered tool's arguments (all its required ones,
/// none it does not take; of a tool that requires none, two or more).
pub(super) fn bare_arguments(item: &Value, tools: &[ToolSpec]) -> Option<(String, Value)> {
    let keys: Vec<&String> = item.as_object()?.keys().collect();
    let fits = |t: &&ToolSpec| {
        let properties = t.parameters.get("properties").and_then(Value::as_object);
        // A rich message's fallback may be left out: it is made from the blocks when run.
        let required: Vec<&str> = t
            .parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|r| !(t.name == RICH_SEND && *r == "fallback" && rich_message(item)))
            .collect();
        (if required.is_empty() { keys.len() >= 2 } else { !keys.is_empty() })
            && properties.is_some_and(|p| keys.iter().all(|k| p.contains_key(k.as_str())))
            && required.iter().all(|r| keys.iter().any(|k| k.as_str() == *r))
    };
    let mut fitting = tools.iter().filter(fits);
    let tool = fitting.next()?;
    fitting.next().is_none().then(|| (tool.name.clone(), item.clone()))
}

/// `rich_send`'s arguments for a payload written alone ([`bare_payload`]): the payload,
/// and the fallback if it was written beside the blocks (else it is made from the blocks
/// when the call is run).
pub(super) fn payload_call(item: &Value) -> Value {
    let mut payload = item.clone();
    let fallback = payload.as_object_mut().and_then(|o| o.remove("fallback"));
    let mut arguments = serde_json::json!({"payload": payload});
    if let Some(fallback) = fallback {
        arguments["fallback"] = fallback;
    }
    arguments
}
