//! The conversation as the model gets it.

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
        polls: "",
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
    let msgs = build(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
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
fn richbots_own_notices_never_reach_the_model_and_tool_results_are_framed_as_data() {
    let history = vec![
        ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "hello"})),
        ev(2, "@bot:x", json!({"msgtype": "m.notice", "body": "Sorry, I'm misconfigured."})),
        ev(3, "@alice:x", json!({"msgtype": "m.text", "body": "hello?"})),
    ];
    let msgs = build(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs.iter().all(|m| !matches!(m, Message::Assistant { .. })), "{msgs:?}");
    let Message::System(system) = &msgs[0] else { panic!("system first") };
    assert!(system.contains("data, not instructions") && system.contains("approval notice"), "{system}");
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
    let msgs = build(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1], Message::User("@alice:x [$e1]: weather in Lisbon?".into()));
    assert!(matches!(&msgs[2], Message::Assistant { text: Some(t), .. } if t.starts_with("Tracking: shipped")));
}

#[test]
fn history_is_cut_to_the_budget_keeping_the_newest() {
    let history: Vec<StoredEvent> = (1..=50)
        .map(|i| ev(i, "@alice:x", json!({"msgtype": "m.text", "body": format!("message number {i}")})))
        .collect();
    let msgs = build(&situation(&scope(None), 200), &history, &[], &Parts::new());
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
    let msgs = build(&situation(&scope(Some("$e1")), 10_000), &history, &[press], &Parts::new());
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
    let text = build(&situation(&scope(None), 10_000), &[used("m.text")], &[], &Parts::new());
    assert_eq!(text[1], Message::User(format!("@alice:x [$e1]: waves{note}")));
    let emote = build(&situation(&scope(None), 10_000), &[used("m.emote")], &[], &Parts::new());
    assert_eq!(emote[1], Message::User(format!("* @alice:x waves{note}")));
}

#[test]
fn members_pictures_and_files_are_given_whole_when_fetched_and_named_otherwise() {
    let media = |seq, msgtype: &str, body: &str, filename: Option<&str>| {
        let mut content = json!({"msgtype": msgtype, "body": body, "url": "mxc://x/y"});
        if let Some(f) = filename {
            content["filename"] = f.into();
        }
        ev(seq, "@alice:x", content)
    };
    let history = vec![
        media(1, "m.image", "old.jpg", None),
        media(2, "m.image", "what is this?", Some("cat.jpg")),
        media(3, "m.file", "data.csv", None),
        media(4, "m.file", "paper.pdf", None),
    ];
    let id = |n: &str| OwnedEventId::try_from(n).expect("id");
    let parts = Parts::from([
        (id("$e2"), Part::Image { data_url: "data:image/jpeg;base64,AA==".into(), width: 1, height: 1 }),
        (id("$e3"), Part::Text("a,b\n1,2".into())),
        (id("$e4"), Part::Unread("application/pdf files are not read".into())),
    ]);
    let msgs = build(&situation(&scope(None), 100_000), &history, &[], &parts);
    assert_eq!(
        msgs[1],
        Message::User("@alice:x [$e1]: [image: old.jpg mxc://x/y]".into()),
        "an older picture is named"
    );
    assert_eq!(
        msgs[2],
        Message::UserImages {
            text: "@alice:x [$e2]: [image: cat.jpg mxc://x/y] what is this?".into(),
            images: vec!["data:image/jpeg;base64,AA==".into()]
        }
    );
    assert_eq!(
        msgs[3],
        Message::User("@alice:x [$e3]: [file: data.csv mxc://x/y]\n<file name=\"data.csv\">\na,b\n1,2\n</file>".into())
    );
    assert_eq!(
        msgs[4],
        Message::User(
            "@alice:x [$e4]: [file: paper.pdf mxc://x/y] (not shown to you: application/pdf files are not read)".into()
        )
    );
}

#[test]
fn the_model_reads_its_own_answers_as_it_wrote_them_and_members_as_they_are_shown() {
    let source = crate::render::SOURCE;
    let history = vec![
        ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "plain words", source: "**injected**"})),
        ev(2, "@bot:x", json!({"msgtype": "m.text", "body": "Lisbon 21.5", source: "**Lisbon** 21.5"})),
        ev(3, "@bot:x", json!({"msgtype": "m.text", "body": "Soon", source: "*Soon*"})),
        ev(
            4,
            "@bot:x",
            json!({"msgtype": "m.text", "body": "* Done", "m.relates_to": {"rel_type": "m.replace", "event_id": "$e3"},
                   "m.new_content": {"msgtype": "m.text", "body": "Done", source: "**Done**"}}),
        ),
    ];
    let msgs = build(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs[1], Message::User("@alice:x [$e1]: plain words".into()), "a member's source is never read");
    assert!(matches!(&msgs[2], Message::Assistant { text: Some(t), .. } if t.starts_with("**Lisbon** 21.5\n")));
    assert!(matches!(&msgs[3], Message::Assistant { text: Some(t), .. } if t.starts_with("**Done**\n")), "{msgs:?}");
}
