//! The conversation the model sees, built without I/O: the persona's system prompt, the
//! tools' prompt line, where we are (DM or group, who asks, the time), then the room's
//! recent messages within a character budget (in a thread: the thread only). The
//! persona's own messages are the assistant's turns, shown as their text fallback; button
//! presses are spelled out. Edits are applied: a message edited by its sender appears in
//! its latest form, and the edit events themselves do not appear.

use std::collections::HashMap;

use ruma::{EventId, UserId};
use serde_json::Value;

use super::Scope;
use crate::agent::Message;
use crate::relation::Relation;
use crate::store::StoredEvent;

/// The prompt's parts around the scope.
#[derive(Debug, Clone)]
pub struct Situation<'a> {
    pub scope: &'a Scope,
    pub display_name: &'a str,
    pub system_prompt: &'a str,
    pub tools_line: &'a str,
    pub now_ms: i64,
    /// Characters of history at most.
    pub budget: usize,
}

/// A button pressed by reacting: the reaction `key` on the persona's `message`, which
/// matched the button labelled `label`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Press {
    pub key: String,
    pub label: String,
    pub message: ruma::OwnedEventId,
}

/// Builds the conversation. `history` is the room's messages in order (including the
/// triggering ones); `presses` the button presses (reactions) that started the turn.
pub fn build(s: &Situation<'_>, history: &[StoredEvent], presses: &[Press]) -> Vec<Message> {
    let scope = s.scope;
    let place = if scope.is_dm {
        format!("a direct chat with {}", scope.asker)
    } else {
        format!("the group room {} (answer the person who addressed you)", scope.room)
    };
    let system = format!(
        "{}\n\n{}\n\nYou are {} ({}), in {place}. Asked by: {}. Now: {}.{}",
        s.system_prompt,
        s.tools_line,
        s.display_name,
        scope.persona,
        scope.asker,
        rfc3339(s.now_ms),
        scope.thread.as_ref().map(|r| format!(" This conversation is the thread rooted at {r}.")).unwrap_or_default(),
    );
    let edits = latest_edits(history);
    let mut lines: Vec<Message> = Vec::new();
    let mut used = 0;
    for event in history.iter().rev().filter(|e| in_scope(e, scope.thread.as_deref())) {
        let Some(message) = as_message(event, &scope.persona, edits.get(&*event.event_id).copied()) else {
            continue;
        };
        let len = match &message {
            Message::User(t) | Message::System(t) => t.len(),
            Message::Assistant { text, .. } => text.as_deref().map_or(0, str::len),
            Message::Tool { content, .. } => content.len(),
        };
        if used + len > s.budget && !lines.is_empty() {
            break;
        }
        used += len;
        lines.push(message);
    }
    lines.reverse();
    let mut out = vec![Message::System(system)];
    out.extend(lines);
    for Press { key, label, message } in presses {
        out.push(Message::User(format!(
            "{} pressed the button \"{label}\" ({key}) on your message {message}.",
            scope.asker
        )));
    }
    out
}

/// Whether `event` belongs in a conversation about `thread` (everything does without one).
fn in_scope(event: &StoredEvent, thread: Option<&EventId>) -> bool {
    let Some(root) = thread else { return true };
    event.event_id == root || event.relation().and_then(|r| r.thread_root().map(|t| t == root)).unwrap_or(false)
}

/// For each edited message, the body of its latest edit by the same sender.
fn latest_edits(history: &[StoredEvent]) -> HashMap<&EventId, &str> {
    let senders: HashMap<&EventId, &UserId> = history.iter().map(|e| (&*e.event_id, &*e.sender)).collect();
    let mut edits = HashMap::new();
    for e in history {
        let Some(Relation::Replace { original }) = e.relation() else { continue };
        let Some(body) = e.content().get("m.new_content").and_then(|c| c.get("body")).and_then(Value::as_str) else {
            continue;
        };
        if let Some((&original, &sender)) = senders.get_key_value(&*original)
            && sender == e.sender
        {
            edits.insert(original, body);
        }
    }
    edits
}

fn as_message(event: &StoredEvent, persona: &UserId, edited: Option<&str>) -> Option<Message> {
    let content = event.content();
    if event.relation().is_some_and(|r| r.is_edit()) {
        return None;
    }
    let body = edited.or_else(|| content.get("body").and_then(Value::as_str))?;
    if event.sender == persona {
        return Some(Message::Assistant {
            text: Some(format!("{body}\n[event_id: {}]", event.event_id)),
            tool_calls: Vec::new(),
        });
    }
    let mut line = if event.msgtype() == Some("m.emote") {
        format!("* {} {body}", event.sender)
    } else {
        format!("{} [{}]: {body}", event.sender, event.event_id)
    };
    if let Some(id) = crate::blocks::read_used_id(content) {
        line.push_str(&format!(" (sent by pressing the button with id \"{id}\")"));
    }
    Some(Message::User(line))
}

/// `2026-11-29T20:37:00Z` from epoch milliseconds (UTC).
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruma::{OwnedEventId, OwnedUserId, owned_room_id, owned_user_id};
    use serde_json::json;

    fn ev(seq: i64, sender: &str, content: Value) -> StoredEvent {
        StoredEvent {
            seq,
            event_id: OwnedEventId::try_from(format!("$e{seq}")).expect("event id"),
            room_id: owned_room_id!("!r"),
            sender: OwnedUserId::try_from(sender).expect("user id"),
            event_type: "m.room.message".into(),
            state_key: None,
            origin_ts: 0,
            received_at: 0,
            event: json!({"content": content}),
            processed: false,
        }
    }

    fn scope(thread: Option<&str>) -> Scope {
        Scope {
            room: owned_room_id!("!r"),
            persona: owned_user_id!("@bot:x"),
            asker: owned_user_id!("@alice:x"),
            is_dm: true,
            thread: thread.map(|t| OwnedEventId::try_from(t).expect("event id")),
            reply_to: None,
        }
    }

    fn situation(scope: &Scope, budget: usize) -> Situation<'_> {
        Situation {
            scope,
            display_name: "Bot",
            system_prompt: "Be kind.",
            tools_line: "TOOLS",
            now_ms: 1_795_979_710_219,
            budget,
        }
    }

    #[test]
    fn conversation_has_prompt_situation_and_history_in_order() {
        let history = vec![
            ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "weather?"})),
            ev(2, "@bot:x", json!({"msgtype": "m.text", "body": "Lisbon 21.5", "com.ianm.mtrix": {"v": 1}})),
            ev(
                3,
                "@alice:x",
                json!({"msgtype": "m.text", "body": "* edited", "m.relates_to": {"rel_type": "m.replace", "event_id": "$e1"}}),
            ),
            ev(4, "@alice:x", json!({"msgtype": "m.text", "body": "thanks"})),
        ];
        let msgs = build(&situation(&scope(None), 10_000), &history, &[]);
        let Message::System(system) = &msgs[0] else { panic!("system first") };
        assert!(system.starts_with("Be kind.\n\nTOOLS"));
        assert!(system.contains("a direct chat with @alice:x"));
        assert!(system.contains("Now: 2026-11-29T"));
        assert_eq!(msgs.len(), 4);
        assert_eq!(msgs[1], Message::User("@alice:x [$e1]: weather?".into()));
        assert!(matches!(&msgs[2], Message::Assistant { text: Some(t), .. } if t.starts_with("Lisbon 21.5")));
        assert_eq!(msgs[3], Message::User("@alice:x [$e4]: thanks".into()));
    }

    #[test]
    fn edits_by_the_sender_replace_the_text_and_others_edits_are_ignored() {
        let edit = |seq, sender: &str, target: &str, body: &str| {
            ev(
                seq,
                sender,
                json!({"msgtype": "m.text", "body": format!("* {body}"), "m.new_content": {"msgtype": "m.text", "body": body},
                "m.relates_to": {"rel_type": "m.replace", "event_id": target}}),
            )
        };
        let history = vec![
            ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "weather in Lisbn?"})),
            ev(2, "@bot:x", json!({"msgtype": "m.text", "body": "Tracking: packed"})),
            edit(3, "@alice:x", "$e1", "weather in Lisbon?"),
            edit(4, "@bot:x", "$e2", "Tracking: shipped"),
            edit(5, "@mallory:x", "$e1", "hijacked"),
        ];
        let msgs = build(&situation(&scope(None), 10_000), &history, &[]);
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1], Message::User("@alice:x [$e1]: weather in Lisbon?".into()));
        assert!(matches!(&msgs[2], Message::Assistant { text: Some(t), .. } if t.starts_with("Tracking: shipped")));
    }

    #[test]
    fn history_is_cut_to_the_budget_keeping_the_newest() {
        let history: Vec<StoredEvent> = (1..=50)
            .map(|i| ev(i, "@alice:x", json!({"msgtype": "m.text", "body": format!("message number {i}")})))
            .collect();
        let msgs = build(&situation(&scope(None), 200), &history, &[]);
        assert!(msgs.len() < 20);
        assert_eq!(msgs.last(), Some(&Message::User("@alice:x [$e50]: message number 50".into())));
    }

    #[test]
    fn threads_see_only_the_thread_and_presses_are_spelled_out() {
        let in_thread = |seq, body: &str| {
            ev(
                seq,
                "@alice:x",
                json!({"msgtype": "m.text", "body": body, "m.relates_to": {"rel_type": "m.thread", "event_id": "$e1"}}),
            )
        };
        let history = vec![
            ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "root"})),
            ev(2, "@bob:x", json!({"msgtype": "m.text", "body": "elsewhere"})),
            in_thread(3, "in thread"),
        ];
        let press = Press { key: "✅".into(), label: "Yes".into(), message: "$m".try_into().expect("id") };
        let msgs = build(&situation(&scope(Some("$e1")), 10_000), &history, &[press]);
        assert_eq!(msgs.len(), 4);
        assert_eq!(msgs[2], Message::User("@alice:x [$e3]: in thread".into()));
        assert_eq!(msgs[3], Message::User("@alice:x pressed the button \"Yes\" (✅) on your message $m.".into()));
    }

    #[test]
    fn a_button_press_keeps_its_note_in_an_emote_too() {
        let used = |msgtype: &str| {
            ev(1, "@alice:x", json!({"msgtype": msgtype, "body": "waves", "com.ianm.mtrix.used": {"id": "wave"}}))
        };
        let note = " (sent by pressing the button with id \"wave\")";
        let text = build(&situation(&scope(None), 10_000), &[used("m.text")], &[]);
        assert_eq!(text[1], Message::User(format!("@alice:x [$e1]: waves{note}")));
        let emote = build(&situation(&scope(None), 10_000), &[used("m.emote")], &[]);
        assert_eq!(emote[1], Message::User(format!("* @alice:x waves{note}")));
    }

    #[test]
    fn timestamps_format_as_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_979_710_219), "2026-11-29T19:15:10Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
    }
}
