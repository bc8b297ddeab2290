//! Answers that are a tool's result rather than words to the member: copied from this
//! turn's results, retold ("There was an issue with the payload…"), or made up in a
//! result's shape. Small models repeat what their tools returned; left to stand, later
//! answers copy it for any question.

use crate::agent::Message;

/// Whether `answer` is a tool's result copied: one of this turn's results (a JSON object
/// of some length) inside it, or a tool error's JSON (`{"error": …, "code"/"path": …}`)
/// at its start, as a small model repeats one from this turn or its last answer.
pub(super) fn copies_a_result(answer: &str, messages: &[Message]) -> bool {
    let copied = messages.iter().any(|m| match m {
        Message::Tool { content, .. } => {
            (content.len() >= 24 && content.starts_with('{') && answer.contains(content.as_str()))
                || error_of(content).is_some_and(|e| e.len() >= 20 && answer.contains(e.as_str()))
        }
        _ => false,
    });
    let error = serde_json::Deserializer::from_str(answer.trim_start())
        .into_iter::<serde_json::Value>()
        .next()
        .and_then(Result::ok)
        .is_some_and(|v| v.get("error").is_some() && (v.get("code").is_some() || v.get("path").is_some()));
    copied || error || imitates_a_result(answer) || retells_an_error(answer, messages)
}

/// Whether `answer` retells a tool error of this turn to the member: it speaks of the
/// payload, which only the model writes ("There was an issue with the payload for the
/// `weather` block … Please correct it.", Qwen2.5-Coder-1.5B after its `"temp": "23°C"`
/// was refused), and a call failed this turn. Left to stand, later answers copy it for
/// any question.
fn retells_an_error(answer: &str, messages: &[Message]) -> bool {
    static PAYLOAD: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)\bpayloads?\b").expect("a valid regex"));
    let errors: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => error_of(content),
            _ => None,
        })
        .collect();
    !errors.is_empty() && (PAYLOAD.is_match(answer) || errors.iter().any(|e| asks_for_what_was_missing(answer, e)))
}

/// Whether `answer` asks the member for a field the model's own call missed (`error`:
/// `missing required field "temp"`): "To get the weather, you need to provide the
/// temperature." (Qwen2.5-Coder-1.5B, the answers benchmark, seed 3, after its weather
/// block had `"temp": null`; each later answer then took the shape "To …, you need to
/// provide the …"). The member asked for the weather; the field is the model's to fill.
fn asks_for_what_was_missing(answer: &str, error: &str) -> bool {
    static MISSING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"missing required field \\?"([A-Za-z_]+)"#).expect("a valid regex")
    });
    static ASKS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)\b(you|u)\s+(need|must|have|should|will need|'ll need)\s+(to\s+)?(provide|give|specify|supply|enter|include|add)\b|\bplease\s+(provide|give|specify|supply|enter|include|add)\b",
        )
        .expect("a valid regex")
    });
    let lower = answer.to_lowercase();
    ASKS.is_match(answer)
        && MISSING.captures_iter(error).any(|c| {
            let field = c[1].to_lowercase();
            lower.split(|ch: char| !ch.is_alphanumeric()).any(|w| !w.is_empty() && w.starts_with(&field))
        })
}

/// The error message of a tool result, if it is an error.
pub(super) fn error_of(content: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(content).ok()?;
    v.get("error")?.as_str().map(str::to_owned)
}

/// Keys of what richbot's tools return: their results and their errors.
const RESULT_KEYS: [&str; 15] = [
    "event_id",
    "posted",
    "shown_by",
    "edited",
    "waited_ms",
    "poll",
    "result",
    "id",
    "next_times",
    "schedules",
    "cancelled",
    "error",
    "code",
    "path",
    "status",
];

/// The arguments of a rich message (`rich_send`, `rich_edit`).
const MESSAGE_KEYS: [&str; 5] = ["payload", "fallback", "room", "reply_to", "thread"];

/// Whether `answer` is nothing but a tool's result made up in its shape (alone or in a
/// fence): a small model told a call failed answers `{"event_id": "null", "next_times":
/// []}` (Qwen2.5-Coder-1.5B, the benchmark), and then copies it into every later answer.
/// A JSON object of result keys only, at least one of them a result's own (`event_id`,
/// `next_times`, `error`); or anything in a template's `<tool_response>` tags.
fn imitates_a_result(answer: &str) -> bool {
    let trimmed = answer.trim();
    // The tags a chat template wraps tool results in (Qwen's, Hermes'), written by the
    // model: it plays the tool ("<tool_response>Try again with …</tool_response>").
    if trimmed.contains("<tool_response>") || trimmed.contains("</tool_response>") {
        return true;
    }
    let inner = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map_or(trimmed, |fenced| fenced.trim_start_matches(|c: char| c.is_ascii_alphabetic()).trim());
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str::<serde_json::Value>(inner) else {
        return false;
    };
    // Beside a result's keys, a rich message's arguments: `{"event_id": "1", "fallback":
    // "Countdown: …"}` is half a call and half a result (the benchmark's countdown).
    let known = |k: &str| RESULT_KEYS.contains(&k) || MESSAGE_KEYS.contains(&k);
    !fields.is_empty()
        && fields.keys().all(|k| known(k))
        && ["event_id", "next_times", "error"].iter().any(|k| fields.contains_key(*k))
}
