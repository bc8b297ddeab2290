//! Tool calls written as text. Small and mid-size open models often write a call instead
//! of making it: a JSON object with `name` and `arguments` (alone, or in a ```` ```json ````
//! fence), wrapped in `<tool_call>`, `<tools>` or a tag named after the tool, sometimes
//! with the doubled braces of the template text they copy (`{{"name": …}}`). The server
//! then returns no `tool_calls`, and the member would read raw JSON.
//!
//! [`read`] finds such calls in a reply's text, where a native call is read: a recovered
//! call goes through the same checks and the same recorded round as a native one. It is
//! conservative by construction: only JSON that names an offered tool (or, alone in the
//! reply, has exactly one tool's arguments, or is plainly a rich message's arguments) is
//! a call; prose that mentions a tool is prose. A reply that is plainly a call of
//! something not offered (a block type, an imagined tool) is that call: the turn makes a
//! block's call its rich message, and answers another as an unknown tool. Something that looks like a call to an offered tool but cannot be read is
//! [`Read::Unreadable`]: the model is told to make the call instead (the turn does that),
//! and it is never posted.
//!
//! A call written as a Python call, as the whole answer (`countdown(until="2027")`), is
//! read too ([`pythonic`]).
//!
//! [`shown_until`] is the streaming side: how much of a text still being written can be
//! shown without showing a call being typed.

use serde_json::{Map, Value};

use super::{Reply, ToolCall, ToolSpec};
use bare::{RICH_SEND, bare_arguments, bare_payload, mentioned, payload_call, rich_message};
use lenient::{json, payload_wrapped, salvaged_message};

mod bare;
mod lenient;
mod pythonic;
mod shown;
pub use shown::shown_until;

/// What a reply's text is.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// Prose: no call in it.
    Prose,
    /// Calls written as text, and the prose around them (`None`: nothing else).
    Calls { calls: Vec<ToolCall>, rest: Option<String> },
    /// It looks like a call to an offered tool, but cannot be read.
    Unreadable,
}

/// `reply` with the calls its text wrote made its calls (the text left is the prose around
/// them), or marked when its text is a call that cannot be read. A reply with native
/// calls is left as it is.
pub fn recover(mut reply: Reply, tools: &[ToolSpec], round: u32) -> Reply {
    let Some(text) = reply.text.as_deref().filter(|_| reply.tool_calls.is_empty()) else { return reply };
    match read(text, tools, round) {
        Read::Prose => {}
        Read::Calls { calls, rest } => {
            reply.written = u32::try_from(calls.len()).unwrap_or(u32::MAX);
            reply.tool_calls = calls;
            reply.text = rest;
            // As a native call: the last one written when the token limit came is cut.
            let length = reply.length;
            reply = reply.stopped_at_length(length);
        }
        Read::Unreadable => reply.unreadable_text = true,
    }
    reply
}

/// The prefix of a written call's id (`written_<round>_<n>`).
pub const ID_PREFIX: &str = "written_";

/// A piece of the text that may hold a call: where it is, and what it holds.
struct Candidate<'a> {
    span: std::ops::Range<usize>,
    body: &'a str,
    /// The tool its tag names (`<rich_send>{…}</rich_send>`: the body is the arguments).
    tagged: Option<&'a str>,
    /// The whole text (or a fence that is the whole text): bare arguments may be a call.
    alone: bool,
    /// Inside `<tool_call>` or `<tools>`: whatever it holds was meant as a call.
    wrapped: bool,
}

/// The calls written in `text`, to the tools in `tools`; `round` numbers their ids.
pub fn read(text: &str, tools: &[ToolSpec], round: u32) -> Read {
    // The whole answer one Python call (`countdown(until="2027-01-01")`) of an offered
    // tool, or of a block type (the turn makes that its rich message).
    let known = |name: &str| tools.iter().any(|t| t.name == name) || crate::blocks::spec(name).is_some();
    match pythonic::read(text, known) {
        pythonic::Pythonic::Call(name, arguments) => {
            let arguments = payload_wrapped(&name, arguments);
            let calls = vec![ToolCall::new(format!("{ID_PREFIX}{round}_0"), name, arguments.to_string())];
            return Read::Calls { calls, rest: None };
        }
        pythonic::Pythonic::Unreadable => return Read::Unreadable,
        pythonic::Pythonic::No => {}
    }
    let candidates = candidates(text, tools);
    let mut calls = Vec::new();
    let mut taken: Vec<std::ops::Range<usize>> = Vec::new();
    let mut unreadable = false;
    for c in &candidates {
        match parse_calls(c, tools, text) {
            Some(found) if !found.is_empty() => {
                for (name, arguments) in found {
                    let id = format!("{ID_PREFIX}{round}_{}", calls.len());
                    calls.push(ToolCall::new(id, name, arguments.to_string()));
                }
                taken.push(c.span.clone());
            }
            _ if names_a_tool(c, tools) => unreadable = true,
            _ => {}
        }
    }
    if calls.is_empty() {
        return if unreadable { Read::Unreadable } else { Read::Prose };
    }
    let mut rest = String::new();
    let mut at = 0;
    for span in &taken {
        rest.push_str(&text[at..span.start]);
        at = span.end;
    }
    rest.push_str(&text[at..]);
    let rest = rest.trim();
    Read::Calls { calls, rest: (!rest.is_empty()).then(|| rest.to_owned()) }
}

/// The pieces of `text` that may hold calls: fences, tags, and the whole text.
fn candidates<'a>(text: &'a str, tools: &'a [ToolSpec]) -> Vec<Candidate<'a>> {
    let mut out = Vec::new();
    let trimmed = text.trim();
    // Fences: ```json … ``` (or no language).
    let mut at = 0;
    while let Some(open) = text[at..].find("```").map(|i| at + i) {
        let after = open + 3;
        let Some(line_end) = text[after..].find('\n').map(|i| after + i) else { break };
        let language = text[after..line_end].trim();
        let Some(close) = text[line_end..].find("```").map(|i| line_end + i) else { break };
        if language.is_empty() || language.eq_ignore_ascii_case("json") || language.eq_ignore_ascii_case("tool_call") {
            let body = &text[line_end + 1..close];
            let alone = text[..open].trim().is_empty() && text[close + 3..].trim().is_empty();
            out.push(Candidate { span: open..close + 3, body, tagged: None, alone, wrapped: false });
        }
        at = close + 3;
    }
    // Tags: <tool_call>…</tool_call>, <tools>…</tools>, <function_call>…, <TOOL>…</TOOL>.
    // `<tool_response>` too: a model playing the tool writes its rich message in the tags
    // its template puts results in (Qwen2.5-Coder-1.5B, the benchmark).
    let mut tags: Vec<(&str, Option<&str>)> = vec![
        ("tool_call", None),
        ("tools", None),
        ("tool_response", None),
        ("function_call", None),
        ("functioncall", None),
    ];
    tags.extend(tools.iter().map(|t| (t.name.as_str(), Some(t.name.as_str()))));
    for (tag, tagged) in tags {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        let mut at = 0;
        while let Some(start) = text[at..].find(&open).map(|i| at + i) {
            let body_start = start + open.len();
            // An unclosed tag runs to the end (models stop before closing it).
            let (body_end, end) = match text[body_start..].find(&close) {
                Some(i) => (body_start + i, body_start + i + close.len()),
                None => (text.len(), text.len()),
            };
            if !out.iter().any(|c: &Candidate<'_>| c.span.contains(&start)) {
                let wrapped = matches!(tag, "tool_call" | "tools" | "tool_response");
                out.push(Candidate {
                    span: start..end,
                    body: &text[body_start..body_end],
                    tagged,
                    alone: false,
                    wrapped,
                });
            }
            at = end;
        }
    }
    if out.is_empty() && (trimmed.starts_with('{') || trimmed.starts_with('[')) {
        let start = text.len() - text.trim_start().len();
        out.push(Candidate {
            span: start..start + trimmed.len(),
            body: trimmed,
            tagged: None,
            alone: true,
            wrapped: false,
        });
    }
    if out.is_empty() {
        out.extend(inline_calls(text));
    }
    out
}

/// A `{"name": …}` object (or a rich message's bare `{"payload": …}`, or its payload alone) written inside
/// prose ("Sure! {"name": "rich_send", …}"): from its brace to the end of the first JSON
/// value there.
fn inline_calls(text: &str) -> Vec<Candidate<'_>> {
    // Not inside a fence: code is the member's answer, whatever it shows.
    let fenced: Vec<std::ops::Range<usize>> = {
        let marks: Vec<usize> = text.match_indices("```").map(|(i, _)| i).collect();
        marks.chunks(2).map(|m| m[0]..m.get(1).copied().unwrap_or(text.len())).collect()
    };
    let mut out = Vec::new();
    for (start, _) in text.match_indices('{') {
        let rest = text[start..].trim_start_matches('{').trim_start();
        // A rich message's arguments, or its payload alone (`{"blocks": …}`, `{"v": 1, …}`).
        let payload = ["\"payload\"", "\"blocks\"", "\"v\""].iter().any(|k| rest.starts_with(k));
        if !(rest.starts_with("\"name\"") || payload)
            || out.iter().any(|c: &Candidate<'_>| c.span.contains(&start))
            || fenced.iter().any(|f| f.contains(&start))
        {
            continue;
        }
        let doubled = text[start..].starts_with("{{");
        let end = if doubled {
            // Doubled braces: the object ends at the matching `}}`.
            text[start..]
                .find("}}}")
                .map(|i| start + i + 3)
                .or_else(|| text[start..].rfind("}}").map(|i| start + i + 2))
        } else {
            let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
            match values.next() {
                Some(Ok(_)) => Some(start + values.byte_offset()),
                _ => text[start..].rfind('}').map(|i| start + i + 1),
            }
        };
        // A call, not an object that happens to have a name: its arguments are there (or,
        // for a rich message's bare arguments, its blocks).
        let holds = |end: &usize, keys: &[&str]| keys.iter().any(|k| text[start..*end].contains(k));
        let keys: &[&str] = if payload { &["\"blocks\""] } else { &["\"arguments\"", "\"parameters\""] };
        if let Some(end) = end.filter(|end| holds(end, keys)) {
            // On lines of its own (a paragraph of JSON between prose), it was meant as a
            // call, as one in tags is; within a sentence it may be an example.
            let own_lines =
                text[..start].trim_end_matches([' ', '\t']).ends_with('\n') || text[..start].trim().is_empty();
            let own_lines = own_lines
                && (text[end..].trim_start_matches([' ', '\t']).starts_with('\n') || text[end..].trim().is_empty());
            out.push(Candidate {
                span: start..end,
                body: &text[start..end],
                tagged: None,
                alone: false,
                wrapped: own_lines,
            });
        }
    }
    out
}

/// The calls a candidate holds: `None` when it is not JSON, an empty list when it is
/// JSON that calls nothing offered.
fn parse_calls(c: &Candidate<'_>, tools: &[ToolSpec], text: &str) -> Option<Vec<(String, Value)>> {
    let Some(value) = json(c.body) else {
        // Broken JSON that still holds a rich message, as the whole answer or wrapped as a
        // call: that message.
        let sends = (c.alone || c.wrapped) && tools.iter().any(|t| t.name == RICH_SEND);
        return sends.then(|| salvaged_message(c.body)).flatten().map(|args| vec![(RICH_SEND.to_owned(), args)]);
    };
    if let Some(tool) = c.tagged {
        // The tag names the tool: the body is its arguments (or a call of it).
        return Some(match &value {
            Value::Object(o) if o.get("name").and_then(Value::as_str) == Some(tool) => {
                call_of(&value, tools).into_iter().collect()
            }
            Value::Object(_) => vec![(tool.to_owned(), value)],
            _ => Vec::new(),
        });
    }
    let items: Vec<&Value> = match &value {
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    let mut out = Vec::new();
    for item in items {
        // A call of an offered tool; or plainly a call, of something not offered (a block
        // type, an imagined tool): run as such, its result (a block's rich message, or "no
        // such tool") the model's to act on.
        let named =
            named_call(item).filter(|(name, _)| tools.iter().any(|t| t.name == *name) || plainly_a_call(c, item));
        if let Some((name, arguments)) = named {
            out.push((name.clone(), payload_wrapped(&name, arguments)));
        } else if let Some(call) = bare_arguments(item, tools)
            && (c.alone || rich_message(item) || mentioned(text, &c.span, &call.0))
        {
            out.push(call);
        } else if (c.alone || c.wrapped) && bare_payload(item) && tools.iter().any(|t| t.name == RICH_SEND) {
            // A rich message's payload alone (`{"blocks": […]}`), maybe with its fallback
            // beside the blocks (`{"blocks": […], "fallback": "…"}`): its call, the
            // fallback made from the blocks when it is run if it has none.
            out.push((RICH_SEND.to_owned(), payload_call(item)));
        } else {
            return Some(Vec::new());
        }
    }
    Some(out)
}

/// `{"name": T, "arguments": {…}}` (or `parameters`, or arguments as a JSON string, or
/// OpenAI's `{"function": {…}}`) for an offered tool `T`.
fn call_of(item: &Value, tools: &[ToolSpec]) -> Option<(String, Value)> {
    let (name, arguments) = named_call(item)?;
    tools.iter().any(|t| t.name == name).then_some((name, arguments))
}

/// `{"name": N, "arguments": {…}}` (or `parameters`, or arguments as a JSON string, or
/// OpenAI's `{"function": {…}}`), whatever N is.
fn named_call(item: &Value) -> Option<(String, Value)> {
    let item = item.get("function").filter(|f| f.is_object()).unwrap_or(item);
    let name = item.get("name")?.as_str()?;
    let arguments = match item.get("arguments").or_else(|| item.get("parameters")) {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s).ok().filter(Value::is_object)?,
        Some(v @ Value::Object(_)) => v.clone(),
        None => Value::Object(Map::new()),
        Some(_) => return None,
    };
    Some((name.to_owned(), arguments))
}

/// Whether `item`, a `{"name": …}` object of candidate `c`, is plainly a call: the
/// whole answer, or wrapped as one (`<tool_call>`), with arguments; or, anywhere, a call
/// of a block type with arguments (`{"name": "weather", "arguments": {…}}` in a fence
/// between prose, as small models read the block list): no answer shows that by chance.
fn plainly_a_call(c: &Candidate<'_>, item: &Value) -> bool {
    let call = item.get("function").filter(|f| f.is_object()).unwrap_or(item);
    let with_arguments = call.get("arguments").is_some() || call.get("parameters").is_some();
    let of_a_block = call.get("name").and_then(Value::as_str).is_some_and(|n| crate::blocks::spec(n).is_some());
    with_arguments && (c.alone || c.wrapped || of_a_block)
}

/// Whether a candidate that holds no readable call names an offered tool as a call would
/// (a tag, or `"name": "T"`), or holds a rich message's keys: a call gone wrong, not prose.
fn names_a_tool(c: &Candidate<'_>, tools: &[ToolSpec]) -> bool {
    c.tagged.is_some()
        || (c.body.contains("\"payload\"") && c.body.contains("\"blocks\""))
        || tools.iter().any(|t| {
            let quoted = format!("\"{}\"", t.name);
            c.body.contains(&quoted) && (c.body.contains("\"name\"") || c.body.contains("\"arguments\""))
        })
}

#[cfg(test)]
mod tests;
