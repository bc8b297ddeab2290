//! The trigger table: which events start a turn, and why.

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
        typed_buttons: None,
        answers_agent: false,
        poll: None,
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
        ("dm image", msg(json!({"msgtype": "m.image", "body": "x.png"})), dm.clone(), Some(Trigger::Message)),
        ("dm file", msg(json!({"msgtype": "m.file", "body": "data.csv"})), dm.clone(), Some(Trigger::Message)),
        (
            "dm sticker",
            json!({"type": "m.sticker", "origin_server_ts": NOW, "content": {"body": "a cat", "url": "mxc://x/y"}}),
            dm.clone(),
            Some(Trigger::Message),
        ),
        ("dm voice message", msg(json!({"msgtype": "m.audio", "body": "x.ogg"})), dm.clone(), Some(Trigger::Message)),
        (
            "dm image captioned !help",
            msg(json!({"msgtype": "m.image", "body": "!help", "filename": "x.png"})),
            dm.clone(),
            Some(Trigger::Message),
        ),
        ("group image", msg(json!({"msgtype": "m.image", "body": "x.png"})), facts(), None),
        (
            "group image whose caption mentions",
            msg(json!({"msgtype": "m.image", "body": "richbot, what is this?", "filename": "x.png"})),
            facts(),
            Some(Trigger::Mention),
        ),
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
        ("dm reply to an agent's message", text("done"), Facts { answers_agent: true, ..dm.clone() }, None),
        (
            "group reply to an agent's message",
            text("ok"),
            Facts { answers_agent: true, replies_to_persona: true, ..facts() },
            None,
        ),
        (
            "thread of an agent's message",
            text("ok"),
            Facts { answers_agent: true, in_persona_thread: true, ..facts() },
            None,
        ),
        (
            "reply to an agent's message that mentions the persona",
            text("richbot, what does this mean?"),
            Facts { answers_agent: true, replies_to_persona: true, ..facts() },
            Some(Trigger::Mention),
        ),
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
        ("schedules", text("Richbot: !schedules"), facts(), Some(Trigger::Command(Command::Schedules))),
        (
            "unschedule with its id (a # is fine)",
            text("!unschedule #12"),
            dm.clone(),
            Some(Trigger::Command(Command::Unschedule("12".into()))),
        ),
        ("timezone shown", text("!timezone"), dm.clone(), Some(Trigger::Command(Command::Timezone(None)))),
        (
            "timezone set, its case kept",
            text("!timezone Europe/Lisbon"),
            dm.clone(),
            Some(Trigger::Command(Command::Timezone(Some("Europe/Lisbon".into())))),
        ),
        ("unschedule without an id is a question", text("!unschedule"), dm.clone(), Some(Trigger::Message)),
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
            "react button on an agent's message",
            json!({"type": "m.reaction", "origin_server_ts": NOW, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$m", "key": "✅"}}}),
            Facts { reacted_buttons: Some(buttons), answers_agent: true, ..facts() },
            None,
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

#[test]
fn a_typed_answer_naming_a_button_presses_it() {
    let buttons = vec![
        Button { label: "Yes, book it!".into(), action: Action::React { key: "✅".into() }, style: None, id: None },
        Button {
            label: "Another time".into(),
            action: Action::Send { body: "maybe next week".into() },
            style: None,
            id: None,
        },
        Button { label: "👍".into(), action: Action::React { key: "👍".into() }, style: None, id: None },
    ];
    let message = ruma::event_id!("$m");
    let typed = Facts { is_dm: true, typed_buttons: Some((&buttons, message)), ..facts() };
    let text = |b: &str| msg(json!({"msgtype": "m.text", "body": b}));
    let press = |key: &str, label: &str| {
        Some(Trigger::ButtonReact(Press { key: key.into(), label: label.into(), message: message.to_owned() }))
    };
    assert_eq!(trigger(&text("yes book it"), &typed), press("✅", "Yes, book it!"), "case and punctuation ignored");
    assert_eq!(trigger(&text("  YES, Book it. "), &typed), press("✅", "Yes, book it!"));
    assert_eq!(trigger(&text("✅"), &typed), press("✅", "Yes, book it!"), "a react button's key");
    assert_eq!(trigger(&text("Another time"), &typed), press("maybe next week", "Another time"));
    assert_eq!(trigger(&text("Maybe next week!"), &typed), press("maybe next week", "Another time"), "a send body");
    assert_eq!(trigger(&text("👍"), &typed), press("👍", "👍"), "an emoji label is pressed by its key");
    // Anything else is a message, as before.
    assert_eq!(trigger(&text("yes, book it for 8 people"), &typed), Some(Trigger::Message));
    assert_eq!(trigger(&text("!"), &typed), Some(Trigger::Message), "no words match no label");
    // A picture is never a press; a command stays a command.
    let picture = msg(json!({"msgtype": "m.image", "body": "Another time", "url": "mxc://s/p"}));
    assert_eq!(trigger(&picture, &typed), Some(Trigger::Message));
    assert!(matches!(
        trigger(&text("!help"), &Facts { typed_buttons: Some((&buttons, message)), ..typed.clone() }),
        Some(Trigger::Command(_))
    ));
    // Without the message's buttons (a group message that replies to nothing of ours): none.
    assert_eq!(trigger(&text("Another time"), &Facts { is_dm: true, ..facts() }), Some(Trigger::Message));
}

#[test]
fn a_number_replied_to_an_open_poll_is_a_vote_and_starts_no_turn() {
    let answers = vec!["Pizza".to_owned(), "Sushi".to_owned()];
    let vote = |answer: &str| Some(Trigger::Vote { poll: 7, answer: answer.into() });
    let reply = |body: &str| {
        msg(json!({"msgtype": "m.text", "body": body, "m.relates_to": {"m.in_reply_to": {"event_id": "$poll"}}}))
    };
    let replied = Facts { replies_to_persona: true, poll: Some((&answers, 7, true)), ..facts() };
    assert_eq!(trigger(&reply("2"), &replied), vote("2"));
    assert_eq!(trigger(&reply("> <@richbot:example.org> Lunch?\n\n#1"), &replied), vote("1"), "past a quote");
    assert_eq!(trigger(&reply("sushi!"), &replied), vote("2"), "a reply may name the answer");
    assert_eq!(trigger(&reply("3"), &replied), Some(Trigger::Reply), "no such answer: a question for the model");
    assert_eq!(trigger(&reply("2 or 3?"), &replied), Some(Trigger::Reply));
    let picture = msg(json!({"msgtype": "m.image", "body": "2", "url": "mxc://s/p"}));
    assert_eq!(trigger(&picture, &Facts { is_dm: true, ..replied.clone() }), Some(Trigger::Message));
    // In a DM a bare number votes; the answer's words are a message.
    let dm = Facts { is_dm: true, poll: Some((&answers, 7, false)), ..facts() };
    let text = |b: &str| msg(json!({"msgtype": "m.text", "body": b}));
    assert_eq!(trigger(&text("1."), &dm), vote("1"));
    assert_eq!(trigger(&text("Pizza"), &dm), Some(Trigger::Message));
    // Our own personas and members not allowed never vote.
    assert_eq!(trigger(&reply("2"), &Facts { sender_is_ours: true, ..replied.clone() }), None);
    assert_eq!(trigger(&reply("2"), &Facts { sender_allowed: false, ..replied }), None);
}
