//! `m.relates_to`, read in one place. Replies, threads, edits and reactions all hang off
//! this one content field; every stage that asks "what does this event point at?" asks
//! here, so a lenient reading (a relation that does not parse is no relation) is the same
//! everywhere. The wire shape is ruma's (`RelationType`, `InReplyTo`); the enum is ours,
//! because ruma's own `Relation` comes only with a fully parsed message content, which
//! would cost the lenient history its odd events.

use ruma::events::relation::{InReplyTo, RelationType};
use ruma::{EventId, OwnedEventId};
use serde::Deserialize;
use serde_json::Value;

/// What an event's content relates to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// A rich reply (`m.in_reply_to`) outside a thread.
    Reply { to: OwnedEventId },
    /// A message in the thread rooted at `root`; `reply_to` is its `m.in_reply_to`
    /// (a real reply, or the client's fallback when `falling_back`).
    Thread { root: OwnedEventId, reply_to: Option<OwnedEventId>, falling_back: bool },
    /// An edit (`m.replace`) of `original`.
    Replace { original: OwnedEventId },
    /// A reaction with `key` on `target`.
    Annotation { target: OwnedEventId, key: String },
    /// Any other relation type.
    Other { target: Option<OwnedEventId> },
}

#[derive(Deserialize)]
struct RelatesTo {
    rel_type: Option<RelationType>,
    event_id: Option<OwnedEventId>,
    key: Option<String>,
    #[serde(rename = "m.in_reply_to")]
    in_reply_to: Option<InReplyTo>,
    #[serde(default)]
    is_falling_back: bool,
}

impl Relation {
    /// The relation of an event's `content`, if it has a readable one.
    pub fn read(content: &Value) -> Option<Self> {
        let r = RelatesTo::deserialize(content.get("m.relates_to")?).ok()?;
        let reply_to = r.in_reply_to.map(|i| i.event_id);
        Some(match (r.rel_type, r.event_id) {
            (None, _) => Relation::Reply { to: reply_to? },
            (Some(RelationType::Thread), Some(root)) => {
                Relation::Thread { root, reply_to, falling_back: r.is_falling_back }
            }
            (Some(RelationType::Replacement), Some(original)) => Relation::Replace { original },
            (Some(RelationType::Annotation), Some(target)) => Relation::Annotation { target, key: r.key? },
            (Some(_), target) => Relation::Other { target },
        })
    }

    /// The event this one points at: the replied-to, thread root, original or reacted one.
    pub fn target(&self) -> Option<&EventId> {
        match self {
            Relation::Reply { to } => Some(to),
            Relation::Thread { root, .. } => Some(root),
            Relation::Replace { original } => Some(original),
            Relation::Annotation { target, .. } => Some(target),
            Relation::Other { target } => target.as_deref(),
        }
    }

    /// The event an `m.in_reply_to` names, in a thread or not.
    pub fn reply_to(&self) -> Option<&EventId> {
        match self {
            Relation::Reply { to } => Some(to),
            Relation::Thread { reply_to, .. } => reply_to.as_deref(),
            _ => None,
        }
    }

    /// The thread root, for a message in a thread.
    pub fn thread_root(&self) -> Option<&EventId> {
        match self {
            Relation::Thread { root, .. } => Some(root),
            _ => None,
        }
    }

    pub fn is_edit(&self) -> bool {
        matches!(self, Relation::Replace { .. })
    }
}

/// A reply's own words: its `body` without the quote of the replied-to message that
/// older clients put first (lines starting with `>`, then a blank line).
pub fn reply_text(body: &str) -> &str {
    if !body.starts_with('>') {
        return body;
    }
    let mut rest = body;
    while rest.starts_with('>') {
        rest = rest.split_once('\n').map_or("", |(_, r)| r);
    }
    rest.strip_prefix('\n').unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(relates: Value) -> Option<Relation> {
        Relation::read(&json!({"body": "x", "m.relates_to": relates}))
    }

    fn id(s: &str) -> OwnedEventId {
        EventId::parse(s).expect("valid id")
    }

    #[test]
    fn relations_read_leniently() {
        let cases: Vec<(&str, Value, Option<Relation>)> = vec![
            ("reply", json!({"m.in_reply_to": {"event_id": "$a"}}), Some(Relation::Reply { to: id("$a") })),
            (
                "thread with fallback",
                json!({"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true, "m.in_reply_to": {"event_id": "$last"}}),
                Some(Relation::Thread { root: id("$root"), reply_to: Some(id("$last")), falling_back: true }),
            ),
            (
                "edit",
                json!({"rel_type": "m.replace", "event_id": "$o"}),
                Some(Relation::Replace { original: id("$o") }),
            ),
            (
                "reaction",
                json!({"rel_type": "m.annotation", "event_id": "$m", "key": "✅"}),
                Some(Relation::Annotation { target: id("$m"), key: "✅".into() }),
            ),
            ("reaction without key", json!({"rel_type": "m.annotation", "event_id": "$m"}), None),
            (
                "other",
                json!({"rel_type": "m.reference", "event_id": "$r"}),
                Some(Relation::Other { target: Some(id("$r")) }),
            ),
            ("no relation", json!({}), None),
            ("bad event id", json!({"rel_type": "m.replace", "event_id": "nope"}), None),
            ("not an object", json!("x"), None),
        ];
        for (name, relates, want) in cases {
            assert_eq!(read(relates), want, "{name}");
        }
        assert_eq!(Relation::read(&json!({"body": "x"})), None);
    }

    #[test]
    fn a_replys_own_words_are_without_the_quote_older_clients_put_first() {
        assert_eq!(reply_text("> <@bot:x> Lunch?\n> 1. Pizza\n\n2"), "2");
        assert_eq!(reply_text("2"), "2");
        assert_eq!(reply_text("> only a quote"), "");
        assert_eq!(reply_text("a > b"), "a > b");
    }
}
