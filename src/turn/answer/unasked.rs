//! Calls written as text that nobody asked for. A small model shown a tool result often
//! writes a fresh call of another tool as text, copied from the tools' descriptions:
//! Qwen2.5-Coder-1.5B, right after its weather message was posted, wrote a `schedule`
//! call ("Remember to go for a walk in the park!") in two tries of four. Run, it would
//! set a reminder the member never wanted, and post it later in their room.
//!
//! So a call the model wrote as text (`agent::written`), of a tool whose effect outlasts
//! the answer (a schedule, a poll, an ended poll, a cancelled schedule), runs only when the member's
//! words ask for that kind of thing. The words are looked for generously (a few common
//! languages' stems too): this guard keeps out what nobody asked for; what the member did
//! ask for in words it misses is the `promises` check's to catch. A native call is the
//! model's own decision and is not judged here, nor is a rich message (the answer itself).

use std::sync::LazyLock;

use regex::Regex;

use crate::agent::{Reply, ToolCall, written};
use crate::tools::{RICH_POLL, RICH_POLL_END, SCHEDULE, UNSCHEDULE};

/// A tool with lasting effects, what a call of it does (for the model), and the words of a
/// member who wants one.
struct Lasting {
    tool: &'static str,
    does: &'static str,
    wanted: Regex,
}

static LASTING: LazyLock<[Lasting; 4]> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(p).expect("a valid regex");
    [
        Lasting {
            tool: SCHEDULE,
            does: "a reminder or schedule",
            wanted: re(
                r"(?i)\b(remind\w*|schedul\w*|every|daily|weekly|monthly|hourly|tomorrow|tonight|alarm|timer|later|recurring|each)\b|\bin\s+(an?|\d+)\s*(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|days?|weeks?)\b|\bat\s+\d{1,2}([:.h]\d\d)?\b|lembr|recuerd|erinner|rappel|ricord|напомн|提醒|リマインド",
            ),
        },
        Lasting {
            tool: RICH_POLL,
            does: "a poll",
            wanted: re(r"(?i)\b(polls?|vot\w*|survey)\b|enquete|umfrage|sondag|encuesta|sondaggio|опрос|投票"),
        },
        Lasting {
            // The answers benchmark's model, right after its poll was posted, wrote a
            // call ending it ("This command will end your poll and display the result.").
            tool: RICH_POLL_END,
            does: "an ended poll",
            wanted: re(
                r"(?i)\b(end\w*|clos\w*|stop\w*|finish\w*|results?|tally|count\w*|wrap up)\b|encerr|termin|beend|schlie|заверш|закр|结束",
            ),
        },
        Lasting {
            tool: UNSCHEDULE,
            does: "a cancelled schedule",
            wanted: re(
                r"(?i)\b(cancel\w*|stop|remove|delete|unschedule|turn off|no more|don'?t remind)\b|cancela|annul|lösch|abbrech|отмен|取消",
            ),
        },
    ]
});

/// A written call taken out of a reply: its tool, what it would have done (for the
/// model), and the call as the model wrote it (for its history, when nothing else of the
/// reply is left).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unasked {
    pub tool: String,
    pub does: &'static str,
    pub call: String,
}

/// What a repeated call would have done.
pub const AGAIN: &str = "the same call again after its message was posted";

/// Takes out of `reply` its written calls that `asked` (the member's words) does not ask
/// for, and those that repeat one of `posted` (the turn's calls so far, once one of them
/// posted a message); returns the first taken out. Native calls, and the other written
/// ones, stay.
pub fn take_out(reply: &mut Reply, asked: &str, posted: &[&ToolCall]) -> Option<Unasked> {
    if reply.written == 0 {
        return None;
    }
    let mut first = None;
    reply.tool_calls.retain(|call| {
        if !call.id.starts_with(written::ID_PREFIX) {
            return true;
        }
        let unwanted = LASTING.iter().find(|l| l.tool == call.name && !l.wanted.is_match(asked)).map(|l| l.does);
        let again = || call.identity().is_some_and(|same| posted.iter().any(|p| p.identity().as_ref() == Some(&same)));
        let Some(does) = unwanted.or_else(|| again().then_some(AGAIN)) else { return true };
        if first.is_none() {
            let written = serde_json::json!({"name": call.name, "arguments": call.arguments}).to_string();
            first = Some(Unasked { tool: call.name.clone(), does, call: written });
        }
        false
    });
    let written = reply.tool_calls.iter().filter(|c| c.id.starts_with(written::ID_PREFIX)).count();
    reply.written = u32::try_from(written).unwrap_or(u32::MAX);
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(tools: &[&str]) -> Reply {
        let tool_calls = tools
            .iter()
            .enumerate()
            .map(|(i, t)| ToolCall::new(format!("{}1_{i}", written::ID_PREFIX), *t, "{}"))
            .collect::<Vec<_>>();
        Reply { written: u32::try_from(tool_calls.len()).unwrap_or(0), tool_calls, ..Reply::default() }
    }

    #[test]
    fn a_written_schedule_nobody_asked_for_is_taken_out() {
        let mut reply = written(&[SCHEDULE]);
        let taken = take_out(&mut reply, "What's the weather like in Porto today?", &[]);
        let taken = taken.expect("taken out");
        assert_eq!((taken.tool.as_str(), taken.does), (SCHEDULE, "a reminder or schedule"));
        assert_eq!(taken.call, r#"{"arguments":"{}","name":"schedule"}"#);
        assert!(reply.tool_calls.is_empty());
        assert_eq!(reply.written, 0);
    }

    #[test]
    fn a_written_call_the_member_asked_for_stays() {
        for asked in [
            "Remind me in 2 minutes to stretch.",
            "every morning at 8 send me the weather",
            "ping me in an hour",
            "Lembra-me daqui a 5 minutos de beber água",
        ] {
            let mut reply = written(&[SCHEDULE]);
            assert_eq!(take_out(&mut reply, asked, &[]), None, "{asked}");
            assert_eq!(reply.tool_calls.len(), 1, "{asked}");
        }
        let mut poll = written(&[RICH_POLL]);
        assert_eq!(take_out(&mut poll, "Make a poll: pizza or sushi for lunch?", &[]), None);
        let mut cancel = written(&[UNSCHEDULE]);
        assert_eq!(take_out(&mut cancel, "please cancel my stretch reminder", &[]), None);
        let mut end = written(&[RICH_POLL_END]);
        assert_eq!(take_out(&mut end, "close the lunch poll and show me the results", &[]), None);
    }

    #[test]
    fn a_written_end_of_the_poll_just_asked_for_is_taken_out() {
        // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): its poll posted, it
        // wrote a call ending it.
        let mut end = written(&[RICH_POLL_END]);
        let taken = take_out(&mut end, "Make a poll: pizza or sushi for lunch?", &[]).expect("taken out");
        assert_eq!((taken.tool.as_str(), taken.does), (RICH_POLL_END, "an ended poll"));
        assert!(end.tool_calls.is_empty());
    }

    #[test]
    fn native_calls_and_rich_messages_are_never_judged() {
        let mut reply = Reply { tool_calls: vec![ToolCall::new("call_1", SCHEDULE, "{}")], ..Reply::default() };
        assert_eq!(take_out(&mut reply, "What's the weather?", &[]), None);
        assert_eq!(reply.tool_calls.len(), 1, "a native call is the model's decision");
        let mut mixed = written(&["rich_send", RICH_POLL]);
        let taken = take_out(&mut mixed, "Compare Rust and Go in a table.", &[]);
        assert_eq!(taken.map(|u| u.tool), Some(RICH_POLL.to_owned()));
        assert_eq!(mixed.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["rich_send"]);
        assert_eq!(mixed.written, 1);
    }

    #[test]
    fn a_written_call_that_repeats_a_posted_one_is_taken_out() {
        let sent = ToolCall::new("call_1", "rich_send", r#"{"fallback": "x", "payload": {"v": 1}}"#);
        let mut reply = written(&["rich_send"]);
        reply.tool_calls[0].arguments = r#"{"payload":{"v":1},"fallback":"x"}"#.into();
        let taken = take_out(&mut reply.clone(), "weather?", &[&sent]).expect("the same call");
        assert_eq!((taken.tool.as_str(), taken.does), ("rich_send", AGAIN));
        // Before anything was posted (no `posted` calls), or with other arguments, it runs.
        assert_eq!(take_out(&mut reply.clone(), "weather?", &[]), None);
        let other = ToolCall::new("call_1", "rich_send", r#"{"fallback": "y", "payload": {"v": 1}}"#);
        assert_eq!(take_out(&mut reply, "weather?", &[&other]), None);
    }
}
