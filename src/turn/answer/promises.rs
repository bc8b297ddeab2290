//! Promises no tool kept. A small model answers "Remind me in 2 minutes to stretch" with
//! "Reminder: stretch in 2 minutes." and calls nothing: nothing comes, and the member was
//! told otherwise. Pure: an answer, the turn's conversation (its tool calls and results)
//! and the offered tools in; the promise it breaks, if any, out.
//!
//! What is caught, per kind of thing only a tool does (and only when that tool is offered
//! and no call of it succeeded in this turn):
//! - **a reminder or schedule**: the answer says one is set ("I'll remind you", "reminder
//!   set", "I've scheduled", a line starting "Reminder:"), or the member asked for one
//!   ("remind me to / in / at / tomorrow / every", "set a reminder / timer / alarm") and
//!   the answer does not say it cannot;
//! - **a poll**: the answer says one is made, or the member asked for one ("make a poll")
//!   and the answer does not say it cannot;
//! - **a message sent**: "I've sent / I posted / forwarded …", "the message was posted"
//!   (kept by any call that posts one: a rich message, a schedule's, a poll);
//! - **a cancelled schedule**: the answer says a reminder or schedule is cancelled or
//!   stopped, or the member asked for that and the answer does not say it cannot.
//!
//! An answer that says it cannot (can't, unable, sorry, …) breaks no promise.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::agent::{Message, ToolSpec};

/// One kind of promise: the tool that keeps it, what an answer that makes it says, what a
/// member who asks for it says, and how it is named to the model.
struct Kind {
    tool: &'static str,
    /// The tools whose success keeps it (`tool`, and for a message sent, any that posts
    /// one: a schedule's message is sent, a poll is a message).
    kept_by: &'static [&'static str],
    claims: Regex,
    asks: Option<Regex>,
    what: &'static str,
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid regex")
}

static KINDS: LazyLock<Vec<Kind>> = LazyLock::new(|| {
    vec![
        Kind {
            tool: crate::tools::SCHEDULE,
            kept_by: &[crate::tools::SCHEDULE],
            claims: re(
                r"(?im)\b(i'?ll|i will|i'?m going to|i am going to)\s+(remind|ping|notify|alert|message)\s+you\b|\breminders?\b[^.!?\n]{0,40}\b(is |has been |was )?(set|scheduled|created|added|saved)\b|\b(i'?ve|i have|i)\s+(set|scheduled|created|added)\b[^.!?\n]{0,30}\b(reminders?|alarms?|timers?|schedules?)\b|^\s*(⏰\s*)?reminder\s*:|\b(i'?ve|i have) scheduled\b|\b(it'?s|it is|that'?s|that is) (scheduled|set)\b",
            ),
            asks: Some(re(
                r"(?i)\bremind\s+(me|us)\s+(to|in|at|on|tomorrow|tonight|every|about|that)\b|\bset\s+(a|an|the|my)\s+(reminder|timer|alarm)\b",
            )),
            what: "set a reminder or schedule",
        },
        Kind {
            tool: crate::tools::RICH_POLL,
            kept_by: &[crate::tools::RICH_POLL],
            claims: re(
                r"(?i)\bpoll\b[^.!?\n]{0,40}\b(created|posted|started|set up|is (up|live|open|ready))\b|\b(i'?ve|i have|i)\s+(created|posted|started|made|set up)\b[^.!?\n]{0,20}\bpoll\b",
            ),
            asks: Some(re(r"(?i)\b(make|create|start|run|set up|hold|do)\b[^.!?\n]{0,20}\bpoll\b|^\s*poll\s*:")),
            what: "made a poll",
        },
        Kind {
            tool: crate::tools::RICH_SEND,
            // "The message was posted to the room … and will be repeated at …": the
            // answers benchmark's model, of the reminder it had just set.
            kept_by: &[crate::tools::RICH_SEND, crate::tools::SCHEDULE, crate::tools::RICH_POLL],
            claims: re(
                r"(?i)\b(i'?ve|i have|i just|i)\s+(sent|posted|messaged|forwarded|dm'?ed)\b|\b(rich message|message) (is|was|has been) (sent|posted)\b",
            ),
            asks: None,
            what: "sent a message",
        },
        Kind {
            tool: crate::tools::UNSCHEDULE,
            kept_by: &[crate::tools::UNSCHEDULE],
            claims: re(r"(?i)\b(cancel+ed|stopped|removed|deleted)\b[^.!?\n]{0,30}\b(reminders?|schedules?)\b"),
            asks: Some(re(r"(?i)\b(cancel|stop|remove|delete)\b[^.!?\n]{0,30}\b(reminders?|schedules?)\b")),
            what: "cancelled a schedule",
        },
    ]
});

/// An answer that says it could not.
static DECLINES: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(can'?t|cannot|can not|unable|not able|don'?t have|do not have|couldn'?t|could not|won'?t be able|sorry|no way to|not possible)\b",
    )
});

/// A promise an answer breaks: the tool that would have kept it, what it claims, and
/// whether the member asked for it (then the model is told that, not what it said).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unkept {
    pub tool: &'static str,
    pub what: &'static str,
    pub asked: bool,
}

/// The promise `answer` breaks, if any: in `conversation` (this turn's calls and their
/// results), no call of the tool that keeps it succeeded; `asked` is the member's
/// question; `tools` what was offered.
pub fn unkept(answer: &str, asked: &str, conversation: &[Message], tools: &[ToolSpec]) -> Option<Unkept> {
    let succeeded = succeeded(conversation);
    let declines = DECLINES.is_match(answer);
    let open = |k: &&Kind| tools.iter().any(|t| t.name == k.tool) && !k.kept_by.iter().any(|t| succeeded.contains(t));
    KINDS.iter().filter(open).find_map(|k| {
        let claims = k.claims.is_match(answer) && !declines;
        let asked_for = k.asks.as_ref().is_some_and(|a| a.is_match(asked)) && !declines;
        (claims || asked_for).then_some(Unkept { tool: k.tool, what: k.what, asked: asked_for })
    })
}

/// The tool the member's words `asked` ask for (a reminder, a poll, a cancelled
/// schedule), when it is offered and no call of it succeeded in `conversation`: whatever
/// the answer says, declines included (a small model declines what its tools do: "I'm
/// sorry, but I can't assist with that.", Qwen2.5-Coder-1.5B after two failed calls).
pub fn requested(asked: &str, conversation: &[Message], tools: &[ToolSpec]) -> Option<&'static str> {
    let succeeded = succeeded(conversation);
    KINDS
        .iter()
        .filter(|k| tools.iter().any(|t| t.name == k.tool) && !k.kept_by.iter().any(|t| succeeded.contains(t)))
        .find(|k| k.asks.as_ref().is_some_and(|a| a.is_match(asked)))
        .map(|k| k.tool)
}

/// The tools a call of which succeeded in `conversation` (a result without an error).
fn succeeded(conversation: &[Message]) -> Vec<&str> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut ok = Vec::new();
    for m in conversation {
        match m {
            Message::Assistant { tool_calls, .. } => {
                names.extend(tool_calls.iter().map(|c| (c.id.as_str(), c.name.as_str())));
            }
            Message::Tool { call_id, content } => {
                let failed =
                    serde_json::from_str::<serde_json::Value>(content).ok().is_some_and(|v| v.get("error").is_some());
                if let (Some(name), false) = (names.get(call_id.as_str()), failed) {
                    ok.push(*name);
                }
            }
            _ => {}
        }
    }
    ok
}

#[cfg(test)]
mod tests;
