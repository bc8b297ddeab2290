//! The per-turn note: everything that changes from turn to turn or room to room, in one
//! bracketed first line of the newest member message, so that the system prompt and the
//! tools before it are the same bytes in every room of a persona (a model server reuses
//! them from its cache) and the history shows no ids a model would copy into its answers:
//!
//! `[Now: 2026-12-06T13:40Z. In: a direct chat with @alice:x. Asked by: @alice:x. Ids for
//! tools: your messages $a ("Lisbon, 21 °C"); @alice:x's $b ("and tomorrow?"). Rooms you
//! may post to: "dm" (…); !r:x (named "Team").]`
//!
//! `clean` takes such a note (and the other annotations a model may echo) out of answers:
//! the two agree on this format.

use std::collections::HashMap;

use ruma::{EventId, OwnedEventId, UserId};

use super::Situation;
use crate::agent::Message;
use crate::clock::rfc3339;
use crate::store::StoredEvent;

/// The start of the note, which `clean` recognises.
pub const OPEN: &str = "[Now: ";

/// Ids the note gives, of each side's latest messages.
const IDS_EACH: usize = 3;
/// Characters of a message quoted beside its id.
const QUOTED: usize = 28;

/// The ids the tools may take: the persona's latest messages (to edit them) and the
/// members' (to reply to them), each with its first words.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ids {
    pub own: Vec<(OwnedEventId, String)>,
    pub members: Vec<(OwnedEventId, String)>,
}

/// The ids of the latest messages among `shown` (the events of the conversation).
pub fn ids<'a>(
    shown: impl DoubleEndedIterator<Item = &'a StoredEvent>,
    persona: &UserId,
    edits: &HashMap<&EventId, &str>,
) -> Ids {
    let mut ids = Ids::default();
    for e in shown.rev() {
        if e.event_type != "m.room.message" || e.msgtype() == Some("m.notice") {
            continue;
        }
        let body = edits.get(&*e.event_id).copied().or_else(|| e.content().get("body").and_then(|b| b.as_str()));
        let quoted = crate::blocks::cut(
            body.unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ").as_str(),
            QUOTED,
        );
        let side = if e.sender == persona { &mut ids.own } else { &mut ids.members };
        if side.len() < IDS_EACH {
            side.push((e.event_id.clone(), quoted));
        }
    }
    ids.own.reverse();
    ids.members.reverse();
    ids
}

/// The note for a turn in `s`, with `ids`.
pub fn note(s: &Situation<'_>, ids: &Ids) -> String {
    let scope = s.scope;
    let now = rfc3339(s.now_ms);
    let minute = now.get(..16).map_or(now.clone(), |m| format!("{m}Z"));
    let local = s.zone.map(|tz| {
        let t = crate::schedules::when::rfc3339_in(s.now_ms, tz);
        format!(
            ", {} in {} (their time zone: write times in it)",
            t.get(..16).unwrap_or(&t).replace('T', " "),
            tz.name()
        )
    });
    let place = if scope.is_dm {
        format!("a direct chat with {}", scope.asker)
    } else {
        format!("the group room {} (answer the person who addressed you)", scope.room)
    };
    let thread = scope.thread.as_ref().map(|r| format!(", in the thread rooted at {r}")).unwrap_or_default();
    let mut note =
        format!("{OPEN}{minute}{}. In: {place}{thread}. Asked by: {}.", local.unwrap_or_default(), scope.asker);
    let listed = |list: &[(OwnedEventId, String)]| {
        list.iter()
            .map(|(id, q)| format!("{id} ({})", serde_json::Value::from(q.as_str())))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut sides = Vec::new();
    if !ids.own.is_empty() {
        sides.push(format!("your messages {}", listed(&ids.own)));
    }
    if !ids.members.is_empty() {
        sides.push(format!("members' {}", listed(&ids.members)));
    }
    if !sides.is_empty() {
        note.push_str(&format!(" Ids for tools: {}.", sides.join("; ")));
    }
    let mut rooms = Vec::new();
    if !s.rooms.in_dm {
        rooms.push(format!("\"dm\" (a direct chat with {})", scope.asker));
    }
    for (id, name) in &s.rooms.shared {
        rooms.push(format!("{id} (named {})", serde_json::Value::from(name.as_str())));
    }
    if !rooms.is_empty() {
        note.push_str(&format!(" Rooms you may post to besides this chat: {}.", rooms.join("; ")));
    }
    note.push(']');
    if !s.polls.is_empty() {
        note.push('\n');
        note.push_str(s.polls);
    }
    note
}

/// Puts `note` in a first line of the newest member message (with none, in a system note
/// at the end: never in a message no member wrote).
pub fn tell(out: &mut Vec<Message>, note: &str) {
    for m in out.iter_mut().rev() {
        match m {
            Message::User(text) | Message::UserImages { text, .. } => {
                *text = format!("{note}\n{text}");
                return;
            }
            Message::System(_) => break,
            _ => {}
        }
    }
    out.push(Message::System(note.to_owned()));
}
