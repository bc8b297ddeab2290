//! When the bot answers: a pure function over one event and the facts about its room
//! (gathered from the store by the caller), table-tested.
//!
//! DMs: every `m.text` / `m.emote` from the human. Group rooms: a mention (`m.mentions`,
//! display name or localpart in the body), a reply to one of the persona's messages, or a
//! message in a thread the persona posted in. A reaction whose key matches a `react`
//! button of the persona's message, and a message sent by pressing a `send` button the
//! persona posted in that room, are button presses; `!usage` is a command. Never: our own
//! personas, `m.notice` (what bots send, richbot's own status messages included), edits,
//! redacted events, or senders not allowed. Whether an event came too late to answer
//! ([`is_stale`]) is decided apart, so a question missed during an outage can be told so.

use ruma::UserId;
use serde_json::Value;

use super::command::{Command, command};
use crate::blocks::{Action, read_used_id};
use crate::relation::Relation;
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
    /// A conversation command (`!help`, `!reset`, `!mode`, `!usage`), answered by richbot
    /// itself and never sent to the model.
    Command(Command),
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
            let Some(Relation::Annotation { target, key }) = relation else { return None };
            let button =
                facts.reacted_buttons?.iter().find(|b| matches!(&b.action, Action::React { key: k } if *k == key))?;
            Some(Trigger::ButtonReact(Press { key, label: button.label.clone(), message: target }))
        }
        "m.room.message" => {
            let msgtype = content.get("msgtype").and_then(Value::as_str)?;
            if !matches!(msgtype, "m.text" | "m.emote") || relation.as_ref().is_some_and(Relation::is_edit) {
                return None;
            }
            let body = content.get("body").and_then(Value::as_str)?;
            if let Some(id) = read_used_id(content).filter(|_| facts.used_button_posted) {
                return Some(Trigger::ButtonSend { id: id.to_owned() });
            }
            let mentioned = mentions(content, body, facts);
            if let Some(c) = command(body, facts.persona_id, facts.display_name).filter(|_| facts.is_dm || mentioned) {
                return Some(Trigger::Command(c));
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
mod tests {
    use super::*;
    use crate::blocks::Button;
    use ruma::user_id;
    use serde_json::json;

    const NOW: i64 = 1_000_000_000;

    fn facts() -> Facts<'static> {
        Facts {
            persona_id: user_id!("@richbot:example.org"),
            display_name: "Richbot",
            is_dm: false,
            sender_is_ours: false,
            sender_allowed: true,
            group_requires_mention: true,
            used_button_posted: false,
            replies_to_persona: false,
            in_persona_thread: false,
            reacted_buttons: None,
        }
    }

    fn msg(content: Value) -> Value {
        json!({"type": "m.room.message", "origin_server_ts": NOW - 1000, "content": content})
    }

    #[test]
    fn trigger_table() {
        let buttons =
            vec![Button { label: "Yes".into(), action: Action::React { key: "✅".into() }, style: None, id: None }];
        let buttons: &'static [Button] = Box::leak(buttons.into_boxed_slice());
        let text = |b: &str| msg(json!({"msgtype": "m.text", "body": b}));
        let dm = Facts { is_dm: true, ..facts() };
        let cases: Vec<(&str, Value, Facts<'static>, Option<Trigger>)> = vec![
            ("dm text", text("hi"), dm.clone(), Some(Trigger::Message)),
            ("dm emote", msg(json!({"msgtype": "m.emote", "body": "waves"})), dm.clone(), Some(Trigger::Message)),
            ("dm notice", msg(json!({"msgtype": "m.notice", "body": "bot says"})), dm.clone(), None),
            ("dm image", msg(json!({"msgtype": "m.image", "body": "x.png"})), dm.clone(), None),
            ("own persona", text("hi"), Facts { sender_is_ours: true, ..dm.clone() }, None),
            ("not allowed", text("hi"), Facts { sender_allowed: false, ..dm.clone() }, None),
            (
                "edit",
                msg(
                    json!({"msgtype": "m.text", "body": "* hi", "m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}}),
                ),
                dm.clone(),
                None,
            ),
            ("redacted", json!({"type": "m.room.message", "origin_server_ts": NOW, "content": {}}), dm.clone(), None),
            ("group plain", text("hello all"), facts(), None),
            (
                "group plain, mentions off",
                text("hello all"),
                Facts { group_requires_mention: false, ..facts() },
                Some(Trigger::Message),
            ),
            (
                "group m.mentions",
                msg(json!({"msgtype": "m.text", "body": "hey", "m.mentions": {"user_ids": ["@richbot:example.org"]}})),
                facts(),
                Some(Trigger::Mention),
            ),
            ("group display name", text("richbot, weather?"), facts(), Some(Trigger::Mention)),
            ("group name inside a word", text("richbots are fun"), facts(), None),
            ("group user id", text("ask @richbot:example.org"), facts(), Some(Trigger::Mention)),
            ("group reply", text("and tomorrow?"), Facts { replies_to_persona: true, ..facts() }, Some(Trigger::Reply)),
            ("group thread", text("more"), Facts { in_persona_thread: true, ..facts() }, Some(Trigger::Thread)),
            (
                "button send",
                msg(json!({"msgtype": "m.text", "body": "more please", "com.ianm.mtrix.used": {"id": "more"}})),
                Facts { used_button_posted: true, ..facts() },
                Some(Trigger::ButtonSend { id: "more".into() }),
            ),
            (
                "forged button send in a group",
                msg(json!({"msgtype": "m.text", "body": "more please", "com.ianm.mtrix.used": {"id": "more"}})),
                facts(),
                None,
            ),
            (
                "forged button send in a DM is a plain message",
                msg(json!({"msgtype": "m.text", "body": "more please", "com.ianm.mtrix.used": {"id": "more"}})),
                dm.clone(),
                Some(Trigger::Message),
            ),
            ("usage in a DM", text(" !usage "), dm.clone(), Some(Trigger::Command(Command::Usage))),
            ("usage addressed in a group", text("Richbot: !usage"), facts(), Some(Trigger::Command(Command::Usage))),
            ("usage by user id", text("@richbot:example.org !usage"), facts(), Some(Trigger::Command(Command::Usage))),
            ("help", text("!help"), dm.clone(), Some(Trigger::Command(Command::Help))),
            ("reset", text("Richbot: !RESET"), facts(), Some(Trigger::Command(Command::Reset))),
            ("mode shown", text("richbot, !mode"), facts(), Some(Trigger::Command(Command::Mode(None)))),
            (
                "mode set",
                text("Richbot: !mode Thread"),
                facts(),
                Some(Trigger::Command(Command::Mode(Some("thread".into())))),
            ),
            (
                "unknown command",
                text("!frobnicate"),
                dm.clone(),
                Some(Trigger::Command(Command::Unknown("frobnicate".into()))),
            ),
            ("a bang alone is a message", text("!"), dm.clone(), Some(Trigger::Message)),
            ("usage not addressed in a group", text("!usage"), facts(), None),
            (
                "a sentence that starts with a command is a question",
                text("!usage please explain"),
                dm.clone(),
                Some(Trigger::Message),
            ),
            (
                "react button",
                json!({"type": "m.reaction", "origin_server_ts": NOW, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$m", "key": "✅"}}}),
                Facts { reacted_buttons: Some(buttons), ..facts() },
                Some(Trigger::ButtonReact(Press {
                    key: "✅".into(),
                    label: "Yes".into(),
                    message: "$m".try_into().expect("id"),
                })),
            ),
            (
                "react other key",
                json!({"type": "m.reaction", "origin_server_ts": NOW, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$m", "key": "👍"}}}),
                Facts { reacted_buttons: Some(buttons), ..facts() },
                None,
            ),
            (
                "react on someone else's message",
                json!({"type": "m.reaction", "origin_server_ts": NOW, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$m", "key": "✅"}}}),
                facts(),
                None,
            ),
            (
                "member event",
                json!({"type": "m.room.member", "origin_server_ts": NOW, "content": {"membership": "join"}}),
                dm.clone(),
                None,
            ),
        ];
        for (name, event, facts, want) in cases {
            assert_eq!(trigger(&event, &facts), want, "{name}");
        }
    }

    #[test]
    fn staleness_is_how_late_an_event_was_delivered() {
        let window = 300_000;
        assert!(!is_stale(NOW - 1_000, NOW, window), "delivered at once");
        assert!(is_stale(NOW - 301_000, NOW, window), "delivered after an outage");
        assert!(!is_stale(NOW + 86_400_000, NOW, window), "future-dated: judged by delivery, fresh once");
        // Waiting in the queue afterwards does not make it stale: `now` is not an input.
        assert!(!is_stale(NOW - 1_000, NOW - 500, window));
    }
}
