//! What a member may read of a model's reply, decided before its text is posted: the text
//! cleaned of copied annotations (`context::clean_answer`), and, for the turn's last
//! reply (one without calls), nine answers that are never posted as they are:
//!
//! - word salad, by the model's own odds (`agent::Odds`): the model is asked again, and
//!   never shown it (it would copy it);
//! - a call written as text that could not be read (`agent::written`): the model is told
//!   to make the call instead;
//! - an empty answer (nothing left once cleaned, or nothing a client would show; or no
//!   text at all, with nothing posted, after a call did something, after calls that
//!   failed, or in a DM): the model is told to answer in words;
//! - a promise no tool kept (`promises`): the model is told which tool keeps it;
//! - `[no reply]` in a DM before anything was posted: the member wrote to the persona
//!   and would get nothing; the model is asked once to answer;
//! - richbot's own correction repeated as the answer (`strings::repeats_richbot`): the
//!   model is told the member never sees those notes; after a posted message, the turn
//!   ends quietly;
//! - only who the persona is, in its prompt's words ("I am Richbot (@richbot:localhost).")
//!   to a member who asked something else (`repeats`): the model is told to answer;
//! - word for word an earlier answer, given to another message (`repeats`): small models
//!   imitate their own turns, and one copy makes the next more likely; the model is told
//!   what the member asked now; after a posted message, the turn ends quietly (as it does
//!   after an answer that only refuses: "I'm sorry, but I can't assist with that.");
//! - a tool's result copied into the answer (small models repeat an error they got, and
//!   then their own answer that did), retold ("There was an issue with the payload…"),
//!   or made up in its shape (`{"event_id": "null"}`): the model is told it is for it,
//!   not the member.
//!
//! Each goes back to the model as a correction, within the turn's rounds, at most
//! [`CORRECTIONS`] times a turn; after that the member reads one honest sentence instead.
//! A reply with calls is not judged (its calls are run; its text is shown cleaned).
//!
//! Pure but for its count: a resumed turn, replaying its recorded replies, judges them
//! again the same way.

use std::sync::atomic::{AtomicU32, Ordering};

use self::repeats::{only_introduces_itself, repeats_an_earlier_answer};
use self::results::{copies_a_result, error_of};
use super::promises;
use super::unasked::Unasked;
use crate::agent::{Message, Reply, ToolSpec};
use crate::strings;
use crate::turn::context::clean_answer;

/// Corrections a turn gives at most before it tells the member in one sentence.
pub const CORRECTIONS: u32 = 2;

/// What becomes of a reply's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Shown as this (maybe empty: nothing to show).
    Show(String),
    /// Not shown; the model is told this and asked again.
    Correct(String),
    /// Not shown; the member reads this sentence instead.
    Replace(String),
}

/// The review of one turn's replies.
#[derive(Debug, Default)]
pub struct Review {
    corrections: AtomicU32,
    /// The turn is in a DM, where every message of the member's is to the persona.
    dm: bool,
}

impl Review {
    /// The review of a turn in a DM (`dm`) or a group room.
    pub fn new(dm: bool) -> Self {
        Self { corrections: AtomicU32::new(0), dm }
    }

    /// The verdict on `reply`, answering the conversation `messages` (this turn's calls
    /// and results at its end) with `tools` offered.
    pub fn judge(&self, reply: &Reply, messages: &[Message], tools: &[ToolSpec]) -> Verdict {
        let text = clean_answer(reply.text.as_deref().unwrap_or_default());
        if !reply.tool_calls.is_empty() {
            return Verdict::Show(text);
        }
        if reply.babbled() {
            // Word salad: after a posted message the answer is out, and the turn ends
            // quietly; before one, the model answers again without seeing it.
            if posted(messages) {
                return Verdict::Show(strings::NO_REPLY.to_owned());
            }
            return self.correct(strings::CORRECT_BABBLE.to_owned(), strings::COULD_NOT_ANSWER);
        }
        if reply.text.as_deref().is_none_or(|t| t.trim().is_empty()) && !posted(messages) && succeeded(messages) {
            // Nothing at all, after a call did something this turn (a reminder set): the
            // member would not hear of it. Asked again; if it still says nothing, the member
            // reads that it is done (an honest "I couldn't" would be false: the call was
            // made; silence left a member who asked for a reminder not knowing, the Qwen
            // lane in a CI run).
            return self.correct(strings::CORRECT_EMPTY.to_owned(), strings::DONE_UNSAID);
        }
        if reply.text.as_deref().is_none_or(|t| t.trim().is_empty())
            && !posted(messages)
            && (self.dm || tried(messages))
        {
            // Nothing at all, to a member who wrote to the persona (a DM) or after calls
            // that all failed (the answers benchmark's weather: four refused rich_send
            // calls, then nothing): they would get nothing. Asked again, then told.
            return self.correct(strings::CORRECT_EMPTY.to_owned(), strings::COULD_NOT_ANSWER);
        }
        if !posted(messages) && succeeded(messages) && retells_a_result(&text) {
            // A call did something and the answer reads its result out ("The asker's
            // schedule id is 1 … to the member in the chat with room \"!Fc5…\"", the
            // answers benchmark's reminder): the model is told to say it in plain words;
            // if it never does, the member reads that it is done (the call was made).
            return self.correct(strings::CORRECT_TOOL_RESULT.to_owned(), strings::DONE_UNSAID);
        }
        let echoed = repeats_a_correction(&text, messages);
        let repeated = repeats_an_earlier_answer(&text, messages);
        if posted(messages)
            && (means_no_reply(&text) || talks_of_the_tools(&text) || echoed || repeated || only_refuses(&text))
        {
            // The marker itself: the turn ends as any `[no reply]` does.
            return Verdict::Show(strings::NO_REPLY.to_owned());
        }
        if strings::is_no_reply(&text) && !posted(messages) && corrected(messages) {
            // Told to answer, the model chose silence: the member asked and would get
            // nothing at all (the benchmark's weather question, after "please wait").
            return Verdict::Replace(unsaid(messages, strings::COULD_NOT_ANSWER).to_owned());
        }
        if strings::is_no_reply(&text) && !posted(messages) && self.dm && !told(messages, strings::CORRECT_SILENT) {
            // In a DM the member wrote to the persona, and silence leaves them with
            // nothing (the benchmark's "Give me a simple pancake recipe."). Asked once; if
            // the model still chooses silence ("Thanks!" may need no answer), so be it.
            return self.correct(strings::CORRECT_SILENT.to_owned(), strings::NO_REPLY);
        }
        let wrong = if reply.unreadable_text {
            Some((strings::CORRECT_WRITTEN_CALL.to_owned(), strings::COULD_NOT_ANSWER))
        } else if reply.text.as_deref().is_some_and(|t| !t.trim().is_empty())
            && crate::render::plain_text(&text).trim().is_empty()
        {
            Some((strings::CORRECT_EMPTY.to_owned(), strings::COULD_NOT_ANSWER))
        } else if echoed {
            Some((strings::CORRECT_ECHO.to_owned(), strings::COULD_NOT_ANSWER))
        } else if repeated {
            Some((strings::correct_repeat(asked(messages)), strings::COULD_NOT_ANSWER))
        } else if only_introduces_itself(&text, asked(messages)) {
            // If the model still says only that, it may have meant it: it is posted.
            Some((strings::CORRECT_INTRODUCTION.to_owned(), text.as_str()))
        } else if copies_a_result(&text, messages) {
            Some((strings::CORRECT_TOOL_RESULT.to_owned(), strings::COULD_NOT_ANSWER))
        } else if sends_the_member_to_a_tool(&text, tools) {
            Some((strings::CORRECT_MEMBER_CANNOT_CALL.to_owned(), strings::COULD_NOT_ANSWER))
        } else if says_no_reply_bare(&text) && (!asked(messages).contains('?') || tried(messages)) {
            // Nothing is out yet: "No reply." would be posted as it is. Asked again, the
            // model answers or writes the marker; if it never does, nothing is posted (or,
            // after a call that did something, that it is done). (To
            // a question, "Did Bob write back?", it may be the answer; not after a call of
            // the turn, as the answers benchmark's weather: a refused call, then "No reply.")
            Some((strings::CORRECT_BARE_NO_REPLY.to_owned(), unsaid(messages, strings::NO_REPLY)))
        } else if only_defers(&text) {
            Some((strings::CORRECT_DEFERRED.to_owned(), strings::COULD_NOT_ANSWER))
        } else {
            promises::unkept(&text, asked(messages), messages, tools).map(|broken| {
                // "Nothing was set up or sent" is said only when it is true: another call
                // of the turn may have done something (a reminder set, then "the message
                // was posted" of it).
                let sentence = if succeeded(messages) { strings::COULD_NOT_ANSWER } else { strings::PROMISE_NOT_KEPT };
                (strings::correct_promise(broken.what, broken.tool, broken.asked), sentence)
            })
        };
        let Some((correction, sentence)) = wrong else { return Verdict::Show(text) };
        self.correct(correction, sentence)
    }

    /// The verdict on a reply whose calls were all written as text and not asked for
    /// (`unasked`), none of them run: after a posted message the turn ends there (the
    /// answer is out); before one, the model is told and asked again.
    pub fn unasked(&self, unasked: &Unasked, messages: &[Message]) -> Verdict {
        if posted(messages) {
            return Verdict::Show(strings::NO_REPLY.to_owned());
        }
        self.correct(strings::correct_unasked(&unasked.tool, unasked.does), strings::COULD_NOT_ANSWER)
    }

    /// `correction` for the model, or once the turn has had its corrections, `sentence`
    /// for the member.
    fn correct(&self, correction: String, sentence: &str) -> Verdict {
        if self.corrections.fetch_add(1, Ordering::Relaxed) < CORRECTIONS {
            Verdict::Correct(correction)
        } else {
            Verdict::Replace(sentence.to_owned())
        }
    }
}

/// Whether `answer` tells the member to use one of the model's own tools or blocks as a
/// function ("To determine the current weather in Porto, please use the `weather`
/// function.", Qwen2.5-Coder-1.5B): a member calls none; the model does, or answers.
/// Advice about other functions ("use the sorted function") is an answer, unless it
/// pleads ("please use the recipe function").
fn sends_the_member_to_a_tool(answer: &str, tools: &[ToolSpec]) -> bool {
    static SENDS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(use|call|invoke|run)\s+(the\s+)?`?([a-z_]+)`?\s+(function|tool)\b")
            .expect("a valid regex")
    });
    SENDS.captures_iter(answer).any(|c| {
        let name = c[3].to_lowercase();
        let pleads = answer[..c.get(0).map_or(0, |m| m.start())].to_lowercase().trim_end().ends_with("please");
        pleads || tools.iter().any(|t| t.name == name) || crate::blocks::spec(&name).is_some()
    })
}

/// Whether `answer` is only a refusal ("I'm sorry, but I can't assist with that.",
/// Qwen2.5-Coder-1.5B, the answers benchmark, seed 3, right after its poll was posted):
/// after a posted message it says the opposite of what was done.
fn only_refuses(answer: &str) -> bool {
    static REFUSES: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)^((i'?m|i am) sorry,?\s*(but\s*)?)?i\s*(can'?t|cannot|can not|am unable to|'m unable to)\s+(assist|help)(\s+you)?\s+with\s+(that|this)(\s+request)?\s*[.!]?$",
        )
        .expect("a valid regex")
    });
    REFUSES.is_match(crate::render::plain_text(answer).trim())
}

/// Whether `answer` only asks the member to wait ("To find the current weather in Porto,
/// please wait a moment.", Qwen2.5-Coder-1.5B, the benchmark's first question): the turn
/// ends with it, so nothing ever follows. A short answer (a sentence or two) that puts
/// the member off; a long one that says "let me check" on the way to its answer is one.
fn only_defers(answer: &str) -> bool {
    static DEFERS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)\b(please (wait|hold on|stand by|be patient)|wait a (moment|second|sec|minute|bit)|(one|a) moment,? please|just a (moment|second|sec|minute)|give me a (moment|second|sec|minute)|hold on|let me (check|look|find|search|get|fetch|see|retrieve)|i'?ll (get back to you|check|look (it|that) up|find out|let you know|fetch|retrieve))\b",
        )
        .expect("a valid regex")
    });
    const SHORT: usize = 100;
    let plain = crate::render::plain_text(answer);
    plain.trim().chars().count() <= SHORT && DEFERS.is_match(&plain)
}

/// Whether a message was posted in this turn (a tool result with its event id).
pub(in crate::turn) fn posted(messages: &[Message]) -> bool {
    messages.iter().any(|m| match m {
        Message::Tool { content, .. } => serde_json::from_str::<serde_json::Value>(content)
            .is_ok_and(|v| v.get("event_id").is_some() && v.get("error").is_none()),
        _ => false,
    })
}

/// Whether a call was made in this turn (a tool result, an error or not).
fn tried(messages: &[Message]) -> bool {
    messages.iter().any(|m| matches!(m, Message::Tool { .. }))
}

/// Whether a call of this turn did what it was asked (a result that is no error).
fn succeeded(messages: &[Message]) -> bool {
    messages.iter().any(|m| matches!(m, Message::Tool { content, .. } if error_of(content).is_none()))
}

/// What the member reads instead of `sentence` when the turn would end with nothing
/// posted: that it is done, when a call of the turn did something (a "couldn't" would be
/// false, and silence leaves them not knowing), else `sentence`.
fn unsaid<'a>(messages: &[Message], sentence: &'a str) -> &'a str {
    if succeeded(messages) { strings::DONE_UNSAID } else { sentence }
}

/// Whether `answer` repeats richbot's words to the model: one of this turn's corrections,
/// or any as written (`strings::repeats_richbot`).
fn repeats_a_correction(answer: &str, messages: &[Message]) -> bool {
    let said = messages.iter().filter_map(|m| match m {
        Message::User(t) if t.starts_with(strings::CORRECTION) => Some(t.as_str()),
        _ => None,
    });
    strings::repeats_richbot(answer, said)
}

/// Whether richbot sent an answer of this turn back to the model (a correction is in
/// `messages`: corrections are this turn's alone, never history) for what it said; the
/// DM's "say something" is not one: silence stays a choice after it.
fn corrected(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|m| matches!(m, Message::User(t) if t.starts_with(strings::CORRECTION) && t != strings::CORRECT_SILENT))
}

/// Whether richbot told the model `correction` in this turn.
fn told(messages: &[Message], correction: &str) -> bool {
    messages.iter().any(|m| matches!(m, Message::User(t) if t == correction))
}

/// Whether `answer` is the no-reply marker without its brackets ("No reply.", the
/// benchmark's answer to "Thanks, you're very helpful!"): the model means to post
/// nothing, but those words would be posted.
fn says_no_reply_bare(answer: &str) -> bool {
    let lower = answer.to_lowercase();
    lower.trim().trim_end_matches(['.', '!']).trim() == strings::NO_REPLY.trim_matches(['[', ']'])
}

/// Whether an answer after a posted message means to say nothing more, as small models
/// write it: the marker within a sentence ("To end your turn, type exactly [no reply].")
/// or without its brackets ("No reply.").
fn means_no_reply(answer: &str) -> bool {
    answer.to_lowercase().contains(strings::NO_REPLY) || says_no_reply_bare(answer)
}

/// Whether an answer after a posted message talks of the machinery rather than to the
/// member: a small model shown its tool's result explains it ("This tool response
/// indicates that the message was successfully posted… The `event_id` is a unique
/// identifier…", Qwen2.5-Coder-1.5B). The message is out; that is nothing to post.
fn talks_of_the_tools(answer: &str) -> bool {
    static MACHINERY: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\btool[ _](response|result|call|output)s?\b|\bevent[ _]?ids?\b|`event_id`")
            .expect("a valid regex")
    });
    MACHINERY.is_match(answer)
}

/// Whether `answer` reads a tool's result out rather than telling the member: it talks of
/// the machinery (`talks_of_the_tools`), of "the asker" or a schedule's id (the words of
/// richbot's results and notes, never a member's), or names a room by its id.
fn retells_a_result(answer: &str) -> bool {
    static RESULT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\bthe asker\b|\basker'?s\b|\bschedule[ _]ids?\b|\bnext_times\b|(^|[\s\x22'`(])![A-Za-z0-9_-]{6,}:[A-Za-z0-9.-]+")
            .expect("a valid regex")
    });
    talks_of_the_tools(answer) || RESULT.is_match(answer)
}

/// The member's latest words in `messages` (the question the turn answers), without the
/// per-turn note before them (which quotes earlier questions: "Remind me in 1 minute…").
pub(in crate::turn) fn asked(messages: &[Message]) -> &str {
    let text = messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User(t) | Message::UserImages { text: t, .. } if !t.starts_with(strings::CORRECTION) => {
                Some(t.as_str())
            }
            _ => None,
        })
        .unwrap_or_default();
    without_note(text)
}

/// A member's message as the model reads it, without the per-turn note before it.
fn without_note(text: &str) -> &str {
    match text.strip_prefix(crate::turn::context::note::OPEN) {
        // The member's words start at their name, on the line after the note's.
        Some(noted) => noted.find("\n@").map_or("", |at| &noted[at + 1..]),
        None => text,
    }
}

mod repeats;
mod results;
#[cfg(test)]
mod nothing_tests;
#[cfg(test)]
mod tests;
