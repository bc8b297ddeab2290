//! What one loop watches across its rounds, so that a model that misbehaves ends the
//! turn honestly instead of spending it (small local models do both):
//! - **The same call again.** A call the model already made this turn (the same tool, the
//!   same arguments) is not run a second time; the model is told it repeats itself. The
//!   third time, the loop ends with what it has.
//! - **Calls cut off.** A reply whose call was cut (its token limit, or a server that
//!   could not read the call, or a call written as text that the limit left unreadable)
//!   gets the `cut_off` tool error (or a correction) and the model one more try; a second
//!   such reply ends the loop.
//!
//! The turn then tells the member in one sentence (when it had not answered yet), and the
//! admin reads the cause at WARN.

use std::collections::HashMap;
use std::fmt;

use super::{Reply, ToolCall};

/// The third time the same call is made, the loop ends.
pub const SAME_CALL_LIMIT: u32 = 3;
/// The second reply with a cut call ends the loop.
pub const CUT_REPLY_LIMIT: u32 = 2;

/// Why a loop ended before the model answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misbehaved {
    /// Replies kept being cut off (at the token limit, or unreadable to the server).
    CutOff,
    /// The model made this tool's same call again and again.
    Repeating(String),
}

impl fmt::Display for Misbehaved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misbehaved::CutOff => f.write_str("the model's tool calls were cut off twice"),
            Misbehaved::Repeating(tool) => write!(f, "the model made the same {tool} call {SAME_CALL_LIMIT} times"),
        }
    }
}

/// How a call stands against the calls made before it in this loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    First,
    /// Made before: not run again.
    Again,
}

/// The loop's memory of its calls and cut replies.
#[derive(Debug, Default)]
pub struct Guard {
    made: HashMap<(String, String), u32>,
    cut_replies: u32,
    stop: Option<Misbehaved>,
}

impl Guard {
    /// Notes a reply (before its calls run).
    pub fn reply(&mut self, reply: &Reply) {
        // An answer sent back (a call written as text it left unreadable, an empty one)
        // that ran to the token limit is a cut reply too: the model is rambling.
        let rambled =
            reply.length && reply.tool_calls.is_empty() && (reply.unreadable_text || reply.correction.is_some());
        if reply.tool_calls.iter().any(|c| c.cut) || rambled {
            self.cut_replies += 1;
            if self.cut_replies >= CUT_REPLY_LIMIT {
                self.stop.get_or_insert(Misbehaved::CutOff);
            }
        }
    }

    /// Notes one distinct call of a reply: the first time it is made in this loop, or again.
    pub fn call(&mut self, call: &ToolCall) -> Seen {
        let Some((name, args)) = call.identity() else { return Seen::First };
        let times = self.made.entry((name.to_owned(), args)).or_insert(0);
        *times += 1;
        if *times >= SAME_CALL_LIMIT {
            self.stop.get_or_insert(Misbehaved::Repeating(name.to_owned()));
        }
        if *times == 1 { Seen::First } else { Seen::Again }
    }

    /// Whether the loop is to end after this round's results, and why.
    /// Whether a reply so far had a cut call.
    pub fn was_cut(&self) -> bool {
        self.cut_replies > 0
    }

    pub fn stop(&self) -> Option<&Misbehaved> {
        self.stop.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(calls: Vec<ToolCall>) -> Reply {
        Reply { tool_calls: calls, ..Reply::default() }
    }

    #[test]
    fn the_same_call_runs_once_and_the_third_time_ends_the_loop() {
        let mut guard = Guard::default();
        let call = ToolCall::new("a", "rich_send", r#"{"fallback": "hi"}"#);
        let same = ToolCall::new("b", "rich_send", r#"{"fallback":"hi"}"#);
        let other = ToolCall::new("c", "rich_send", r#"{"fallback":"other"}"#);
        assert_eq!(guard.call(&call), Seen::First);
        assert_eq!(guard.call(&other), Seen::First);
        assert_eq!(guard.call(&same), Seen::Again, "the same tool and arguments, however written");
        assert_eq!(guard.stop(), None);
        assert_eq!(guard.call(&call), Seen::Again);
        assert_eq!(guard.stop(), Some(&Misbehaved::Repeating("rich_send".into())));
    }

    #[test]
    fn a_second_cut_reply_ends_the_loop_and_cut_calls_are_never_the_same() {
        let mut guard = Guard::default();
        let mut cut = ToolCall::new("a", "rich_send", r#"{"fallback": "#);
        cut.cut = true;
        for _ in 0..3 {
            assert_eq!(guard.call(&cut), Seen::First);
        }
        guard.reply(&reply(vec![ToolCall::new("x", "t", "{}")]));
        guard.reply(&reply(vec![cut.clone()]));
        assert_eq!(guard.stop(), None, "one more try");
        guard.reply(&reply(vec![cut]));
        assert_eq!(guard.stop(), Some(&Misbehaved::CutOff));
    }

    #[test]
    fn an_answer_sent_back_that_ran_to_the_token_limit_is_a_cut_reply() {
        let mut guard = Guard::default();
        let unread = |length| Reply { unreadable_text: true, length, ..reply(Vec::new()) };
        guard.reply(&unread(false));
        guard.reply(&Reply { length: true, ..reply(Vec::new()) });
        assert!(!guard.was_cut(), "unreadable, or long prose: not cut");
        guard.reply(&unread(true));
        assert_eq!(guard.stop(), None, "one more try");
        // An empty answer sent back that ran to the limit (`<tool_response>` and on).
        guard.reply(&Reply { length: true, correction: Some("empty".into()), ..reply(Vec::new()) });
        assert_eq!(guard.stop(), Some(&Misbehaved::CutOff));
    }
}
