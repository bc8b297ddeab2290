//! What a member read of the persona's answers, judged as a member would: a rich message,
//! clean text, or one of the things a member must never read from a model's raw output
//! (a tool call written out, an annotation copied from the prompt, an empty body).

use serde_json::Value;

use crate::support::BOT;

/// A tool call written out as text: JSON with a name and arguments, a call's tags, or a
/// rich message's arguments.
pub fn pseudo_call(body: &str) -> bool {
    let b = body.to_lowercase();
    (b.contains("\"name\"") && (b.contains("\"arguments\"") || b.contains("\"parameters\"")))
        || [
            "<tool_call>",
            "<tools>",
            "<rich_send>",
            "<rich_edit>",
            "<schedule>",
            "<rich_poll>",
            "\"payload\":",
            "\"blocks\":",
        ]
        .iter()
        .any(|m| b.contains(m))
}

/// An annotation copied from the prompt: an id line, the turn's note, an id after a name,
/// or richbot's own correction to the model.
pub fn annotation(body: &str) -> bool {
    body.contains("[event_id:")
        || body.contains("[Now:")
        || body.contains("Asked by:")
        || body.contains(" [$")
        || richbot::strings::repeats_richbot(body, [])
}

/// Empty to a member (`*` is what an edit of nothing shows).
pub fn empty(body: &str) -> bool {
    body.trim().is_empty() || body.trim() == "*"
}

/// Every content the persona posted from `since` (ms) on: each original and each edit's
/// new content (`.0`), and each message's latest content (`.1`).
pub fn contents(events: &[Value], since: i64) -> (Vec<Value>, Vec<Value>) {
    let ours: Vec<&Value> =
        events.iter().filter(|e| e["sender"] == BOT && e["origin_server_ts"].as_i64().unwrap_or(0) >= since).collect();
    let mut all = Vec::new();
    let mut finals = Vec::new();
    for e in &ours {
        let c = &e["content"];
        if c["m.relates_to"]["rel_type"] == "m.replace" {
            all.push(c["m.new_content"].clone());
            continue;
        }
        all.push(c.clone());
        let id = e["event_id"].as_str().unwrap_or_default();
        let latest = ours
            .iter()
            .rev()
            .find(|x| {
                x["content"]["m.relates_to"]["rel_type"] == "m.replace"
                    && x["content"]["m.relates_to"]["event_id"] == id
            })
            .map(|x| x["content"]["m.new_content"].clone());
        finals.push(latest.unwrap_or_else(|| c.clone()));
    }
    (all, finals)
}

/// Whether a content is a rich message (blocks), a poll or a poll's end (which clients
/// draw from its own fields: it has no `body`).
pub fn rich(content: &Value) -> bool {
    ["com.ianm.mtrix", "org.matrix.msc3381.poll.start", "org.matrix.msc3381.poll.end"]
        .iter()
        .any(|k| content.get(*k).is_some())
}
