//! When the bot answers: a pure function over one event and the facts about its room
//! (gathered from the store by the caller), table-tested.
//!
//! DMs: every `m.text` / `m.emote` from the human. Group rooms: a mention (`m.mentions`,
//! display name or localpart in the body), a reply to one of the persona's messages, or a
//! message in a thread the persona posted in. A reaction whose key matches a `react`
//! button of the persona's message, and a message sent by pressing a `send` button the
//! persona posted in that room, are button presses, and so is a typed answer that names
//! a button of the persona's message (its label, a `send` button's body, a `react`
//! button's key; case and punctuation ignored) in a DM (the persona's latest message) or
//! in a reply to that message: clients that draw no buttons say "or reply *Later*".
//! A reply with a number (or an answer's words) to the persona's open poll or its
//! message, and in a DM a bare number while the poll is recent, is a vote (`polls`).
//! `!usage` is a command. Never: our own
//! personas, `m.notice` (what bots send, richbot's own status messages included), edits,
//! redacted events, or senders not allowed. Whether an event came too late to answer
//! ([`is_stale`]) is decided apart, so a question missed during an outage can be told so.

use ruma::UserId;
use serde_json::Value;

use super::command_syntax::{Command, command};
use crate::blocks::{Action, Button, read_used_id};
use crate::relation::Relation;
use crate::strings::words;
use crate::turn::Press;

/// Why the bot answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// A message in a DM (or any message where mentions are not required).
    Message,
    Mention,
    Reply,
    Thread,
    /// A reaction matching a `react` button of the persona's message.
    ButtonReact(Press),
    /// A message sent by pressing a `send` button that had this id.
    ButtonSend {
        id: String,
    },
    /// A vote by a reply with a number on poll `poll` (its row): kept for the tally, no
    /// turn.
    Vote {
        poll: i64,
        answer: String,
    },
    /// A conversation command (`!help`, `!reset`, `!mode`, `!usage`), answered by richbot
    /// itself and never sent to the model.
    Command(Command),
    /// A schedule's occurrence (`crate::schedules`): a turn of its own, for its asker.
    Scheduled,
}

impl Trigger {
    /// The button press this is, if it is one.
    pub fn press(&self) -> Option<Press> {
        match self {
            Trigger::ButtonReact(p) => Some(p.clone()),
            _ => None,
        }
    }
}

/// What the caller knows about the event's room and relations.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub persona_id: &'a UserId,
    pub display_name: &'a str,
    pub is_dm: bool,
    /// The sender is one of our personas.
    pub sender_is_ours: bool,
    pub sender_allowed: bool,
    pub group_requires_mention: bool,
    /// The event carries a `.used` button id that this persona posted in this room.
    pub used_button_posted: bool,
    /// The event replies to a message of this persona.
    pub replies_to_persona: bool,
    /// The event is in a thread the persona posted in.
    pub in_persona_thread: bool,
    /// For a reaction on a message of this persona: that message's buttons.
    pub reacted_buttons: Option<&'a [crate::blocks::Button]>,
    /// For a text: the persona's message a typed answer would press a button of (the one
    /// it replies to; in a DM, the persona's latest) and that message's buttons.
    pub typed_buttons: Option<(&'a [crate::blocks::Button], &'a ruma::EventId)>,
    /// The event answers a message an agent client had sent (a reply, a reaction, a
    /// message in its thread): the client's to read, not a question for the model
    /// unless it mentions the persona.
    pub answers_agent: bool,
    /// For a text: the open poll it may vote on (its answers, its row), and whether by an
    /// answer's words (a reply) or only by its number (a DM's bare number).
    pub poll: Option<(&'a [String], i64, bool)>,
}

/// Whether (and why) `event` starts a turn for the persona in `facts`.
pub fn trigger(event: &Value, facts: &Facts<'_>) -> Option<Trigger> {
    if facts.sender_is_ours || !facts.sender_allowed {
        return None;
    }
    let content = event.get("content")?;
    let relation = Relation::read(content);
    match event.get("type").and_then(Value::as_str)? {
        "m.reaction" => {
            let Some(Relation::Annotation { target, key }) = relation.filter(|_| !facts.answers_agent) else {
                return None;
            };
            let button =
                facts.reacted_buttons?.iter().find(|b| matches!(&b.action, Action::React { key: k } if *k == key))?;
            Some(Trigger::ButtonReact(Press { key, label: button.label.clone(), message: target }))
        }
        kind @ ("m.room.message" | "m.sticker") => {
            let msgtype =
                if kind == "m.sticker" { "m.image" } else { content.get("msgtype").and_then(Value::as_str)? };
            // A picture, a file or a voice message addresses the persona as a text does (its caption may
            // mention it); it is never a command or a button press.
            let media = matches!(msgtype, "m.image" | "m.file" | "m.audio");
            if !(media || matches!(msgtype, "m.text" | "m.emote")) || relation.as_ref().is_some_and(Relation::is_edit) {
                return None;
            }
            let body = content.get("body").and_then(Value::as_str)?;
            let own_words = crate::relation::reply_text(body);
            if let Some((answers, poll, by_name)) = facts.poll.filter(|_| !media)
                && let Some(i) = crate::polls::chosen(own_words, answers, by_name)
            {
                return Some(Trigger::Vote { poll, answer: crate::polls::answer_id(i) });
            }
            if let Some(id) = read_used_id(content).filter(|_| facts.used_button_posted && !media) {
                return Some(Trigger::ButtonSend { id: id.to_owned() });
            }
            let mentioned = mentions(content, body, facts);
            if facts.answers_agent && !mentioned {
                return None;
            }
            let commanded = (facts.is_dm || mentioned) && !media;
            if let Some(c) = command(body, facts.persona_id, facts.display_name).filter(|_| commanded) {
                return Some(Trigger::Command(c));
            }
            if let Some(press) = facts.typed_buttons.filter(|_| !media).and_then(|(b, m)| typed_press(own_words, b, m))
            {
                return Some(Trigger::ButtonReact(press));
            }
            if facts.is_dm {
                return Some(Trigger::Message);
            }
            if mentioned {
                return Some(Trigger::Mention);
            }
            if facts.replies_to_persona {
                return Some(Trigger::Reply);
            }
            if facts.in_persona_thread {
                return Some(Trigger::Thread);
            }
            (!facts.group_requires_mention).then_some(Trigger::Message)
        }
        _ => None,
    }
}

/// The button of `buttons` (on `message`) that `typed` names, as a press.
fn typed_press(typed: &str, buttons: &[Button], message: &ruma::EventId) -> Option<Press> {
    let said = words(typed);
    let named = |b: &Button| match &b.action {
        Action::React { key } if typed.trim() == key.trim() => true,
        Action::Send { body } if !said.is_empty() && words(body) == said => true,
        _ => !said.is_empty() && words(&b.label) == said,
    };
    let button = buttons.iter().find(|b| named(b))?;
    let key = match &button.action {
        Action::React { key } => key.clone(),
        Action::Send { body } => body.clone(),
    };
    Some(Press { key, label: button.label.clone(), message: message.to_owned() })
}

fn mentions(content: &Value, body: &str, facts: &Facts<'_>) -> bool {
    let listed = content
        .get("m.mentions")
        .and_then(|m| m.get("user_ids"))
        .and_then(Value::as_array)
        .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(facts.persona_id.as_str())));
    let body = body.to_lowercase();
    let localpart = facts.persona_id.localpart().to_lowercase();
    let named = |name: &str| !name.is_empty() && contains_word(&body, name);
    listed
        || body.contains(&facts.persona_id.as_str().to_lowercase())
        || named(&facts.display_name.to_lowercase())
        || named(&localpart)
}

/// Whether an event came too late to answer: delivered more than `window_ms` after it was
/// sent (an outage; the homeserver catching up). Measured from when richbot received it,
/// not from now, so a question that waited behind busy rooms is never dropped for it,
/// and a future-dated `origin_server_ts` buys nothing.
pub fn is_stale(origin_ts: i64, received_at: i64, window_ms: i64) -> bool {
    received_at.saturating_sub(origin_ts) > window_ms
}

/// `needle` in `hay` not as part of a longer word.
fn contains_word(hay: &str, needle: &str) -> bool {
    hay.match_indices(needle).any(|(at, _)| {
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests;
