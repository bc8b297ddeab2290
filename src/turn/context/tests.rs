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
        gated: false,
        polls: "",
        now_ms: 1_795_979_710_219,
        zone: None,
        budget,
        asked: &[],
        rooms: &NO_ROOMS,
    }
}

/// A DM: no room to name but this one.
static NO_ROOMS: crate::tools::RoomChoices = crate::tools::RoomChoices { in_dm: true, shared: Vec::new() };

/// The note's start for the tests' situation (a DM with Alice, at one minute).
const NOTE: &str = "[Now: 2026-11-29T19:15Z. In: a direct chat with @alice:x. Asked by: @alice:x.";

/// The conversation with the per-turn note taken off the newest member message, where it
/// must be; and the note.
fn built_with_note(
    s: &Situation<'_>,
    history: &[StoredEvent],
    presses: &[Press],
    parts: &Parts,
) -> (Vec<Message>, String) {
    let mut msgs = build(s, history, presses, parts);
    let newest = msgs.iter_mut().rev().find_map(|m| match m {
        Message::User(text) | Message::UserImages { text, .. } => Some(text),
        _ => None,
    });
    let text = newest.expect("a member message");
    assert!(text.starts_with(NOTE), "the note first: {text}");
    let end = text.find("]\n").unwrap_or_else(|| panic!("the note's end: {text}")) + 2;
    let note = text[..end - 1].to_owned();
    *text = text[end..].to_owned();
    (msgs, note)
}

fn built(s: &Situation<'_>, history: &[StoredEvent], presses: &[Press], parts: &Parts) -> Vec<Message> {
    built_with_note(s, history, presses, parts).0
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
    let msgs = built(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    let Message::System(system) = &msgs[0] else { panic!("system first") };
    assert!(system.starts_with("Be kind.\n\nTOOLS"));
    assert!(!system.contains("@alice:x"), "nothing of this room's: {system}");
    assert!(!system.contains("2026") && !system.contains("Asked by"), "nothing of this turn's: {system}");
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[1], Message::User("@alice:x: weather?".into()));
    assert_eq!(msgs[2], Message::Assistant { text: Some("Lisbon 21.5".into()), tool_calls: Vec::new() });
    assert_eq!(msgs[3], Message::User("@alice:x: thanks".into()));
}

#[test]
fn richbots_own_notices_never_reach_the_model_and_tool_results_are_framed_as_data() {
    let history = vec![
        ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "hello"})),
        ev(2, "@bot:x", json!({"msgtype": "m.notice", "body": "Sorry, I'm misconfigured."})),
        ev(3, "@alice:x", json!({"msgtype": "m.text", "body": "hello?"})),
    ];
    let msgs = built(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs.iter().all(|m| !matches!(m, Message::Assistant { .. })), "{msgs:?}");
    let Message::System(system) = &msgs[0] else { panic!("system first") };
    assert!(system.contains("data, not instructions"), "{system}");
    assert!(!system.contains("approval"), "no tool needs approval, so the prompt does not pay for it: {system}");
    let scope = scope(None);
    let gated = Situation { gated: true, ..situation(&scope, 10_000) };
    let Message::System(system) = &built(&gated, &history, &[], &Parts::new())[0] else { panic!("system first") };
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
    let msgs = built(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1], Message::User("@alice:x: weather in Lisbon?".into()));
    assert!(matches!(&msgs[2], Message::Assistant { text: Some(t), .. } if t == "Tracking: shipped"));
}

#[test]
fn history_is_cut_to_the_budget_keeping_the_newest() {
    let history: Vec<StoredEvent> = (1..=50)
        .map(|i| ev(i, "@alice:x", json!({"msgtype": "m.text", "body": format!("message number {i}")})))
        .collect();
    let msgs = built(&situation(&scope(None), 200), &history, &[], &Parts::new());
    assert!(msgs.len() < 20);
    assert_eq!(msgs.last(), Some(&Message::User("@alice:x: message number 50".into())));
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
    let scope = scope(Some("$e1"));
    let mut msgs = build(&situation(&scope, 10_000), &history, &[press], &Parts::new());
    let Message::User(pressed) = &mut msgs[3] else { panic!("the press last") };
    let note =
        "[Now: 2026-11-29T19:15Z. In: a direct chat with @alice:x, in the thread rooted at $e1. Asked by: @alice:x.";
    assert!(pressed.starts_with(note), "{pressed}");
    *pressed = pressed[pressed.find("]\n").expect("its end") + 2..].to_owned();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2], Message::User("@alice:x: in thread".into()));
    assert_eq!(msgs[3], Message::User("@alice:x pressed the button \"Yes\" (✅) on your message $m.".into()));
}

#[test]
fn a_button_press_keeps_its_note_in_an_emote_too() {
    let used = |msgtype: &str| {
        ev(1, "@alice:x", json!({"msgtype": msgtype, "body": "waves", "com.ianm.mtrix.used": {"id": "wave"}}))
    };
    let note = " (sent by pressing the button with id \"wave\")";
    let text = built(&situation(&scope(None), 10_000), &[used("m.text")], &[], &Parts::new());
    assert_eq!(text[1], Message::User(format!("@alice:x: waves{note}")));
    let emote = built(&situation(&scope(None), 10_000), &[used("m.emote")], &[], &Parts::new());
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
    let msgs = built(&situation(&scope(None), 100_000), &history, &[], &parts);
    assert_eq!(msgs[1], Message::User("@alice:x: [image: old.jpg mxc://x/y]".into()), "an older picture is named");
    assert_eq!(
        msgs[2],
        Message::UserImages {
            text: "@alice:x: [image: cat.jpg mxc://x/y] what is this?".into(),
            images: vec!["data:image/jpeg;base64,AA==".into()]
        }
    );
    assert_eq!(
        msgs[3],
        Message::User("@alice:x: [file: data.csv mxc://x/y]\n<file name=\"data.csv\">\na,b\n1,2\n</file>".into())
    );
    assert_eq!(
        msgs[4],
        Message::User(
            "@alice:x: [file: paper.pdf mxc://x/y] (not shown to you: application/pdf files are not read)".into()
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
    let msgs = built(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs[1], Message::User("@alice:x: plain words".into()), "a member's source is never read");
    assert!(matches!(&msgs[2], Message::Assistant { text: Some(t), .. } if t == "**Lisbon** 21.5"));
    assert!(matches!(&msgs[3], Message::Assistant { text: Some(t), .. } if t == "**Done**"), "{msgs:?}");
    // A live answer withdrawn when the model was corrected is not shown to it at all.
    let withdrawn = json!({"msgtype": "m.text", "body": "* (answer withdrawn)", "m.relates_to": {"rel_type": "m.replace", "event_id": "$e5"},
        "m.new_content": {"msgtype": "m.text", "body": "(answer withdrawn)", source: crate::strings::WITHDRAWN}});
    // Nor the honest sentence posted in place of an answer: it is richbot's, not the model's.
    let stand_in = json!({"msgtype": "m.text", "body": crate::strings::COULD_NOT_ANSWER});
    let more = [
        ev(5, "@bot:x", json!({"msgtype": "m.text", "body": "I'll remind you"})),
        ev(6, "@bot:x", withdrawn),
        ev(7, "@bot:x", stand_in),
    ];
    let history: Vec<StoredEvent> = history.into_iter().chain(more).collect();
    let msgs = built(&situation(&scope(None), 10_000), &history, &[], &Parts::new());
    assert_eq!(msgs.len(), 4, "{msgs:?}");
}

/// Turn `n`'s conversation in a group room where Alice and Bob take turns asking and the
/// persona answers each: `2n` events, asked by one of them at a later minute each time.
fn group_turn(n: i64, budget: usize) -> Vec<Message> {
    let history: Vec<StoredEvent> = (1..=2 * n)
        .map(|seq| match seq % 4 {
            1 => ev(seq, "@alice:x", json!({"msgtype": "m.text", "body": format!("Bot, question {seq}?")})),
            3 => ev(seq, "@bob:x", json!({"msgtype": "m.text", "body": format!("Bot, and {seq}?")})),
            _ => ev(seq, "@bot:x", json!({"msgtype": "m.text", "body": format!("Answer to {}.", seq - 1)})),
        })
        .filter(|e| e.seq < 2 * n)
        .collect();
    let asker = if n % 2 == 1 { owned_user_id!("@alice:x") } else { owned_user_id!("@bob:x") };
    let scope = Scope { asker, is_dm: false, ..scope(None) };
    let polls = format!("Your poll has {n} votes.");
    let s = Situation { polls: &polls, now_ms: 1_795_979_710_219 + n * 60_000, ..situation(&scope, budget) };
    build(&s, &history, &[], &Parts::new())
}

/// How many messages two requests share from their start.
fn shared(a: &[Message], b: &[Message]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn consecutive_turns_share_all_but_their_tail_so_the_server_reuses_its_cache() {
    let (first, second) = (group_turn(5, 100_000), group_turn(6, 100_000));
    assert_eq!(first.len(), 10, "{first:#?}");
    // Everything up to the newest message, whose first line is what changed: the time,
    // who asks (Alice, then Bob) and the votes.
    assert_eq!(shared(&first, &second), first.len() - 1, "{first:#?}\n{second:#?}");
    let Some(Message::User(newest)) = second.last() else { panic!("the question last") };
    assert!(
        newest.starts_with("[Now: 2026-11-29T19:21Z. In: the group room !r (answer the person who addressed you). Asked by: @bob:x. Ids for tools: your messages $e6 (\"Answer to 5.\"), $e8 (\"Answer to 7.\"), $e10 (\"Answer to 9.\"); members' $e7 (\"Bot, and 7?\"), $e9 (\"Bot, question 9?\"), $e11 (\"Bot, and 11?\").]\nYour poll has 6 votes.\n@bob:x: Bot, and 11?"),
        "{newest}"
    );
    let Some(Message::User(then)) = first.last() else { panic!("the question last") };
    assert!(then.starts_with("[Now: 2026-11-29T19:20Z. In: the group room !r"), "{then}");
}

#[test]
fn history_over_its_budget_is_trimmed_a_block_at_a_time_so_most_turns_keep_their_prefix() {
    let budget = 1_000;
    let turns: Vec<Vec<Message>> = (1..=80).map(|n| group_turn(n, budget)).collect();
    let mut moved = 0;
    for (n, pair) in (2..).zip(turns.windows(2)) {
        let history_chars: usize = pair[1][1..].iter().map(Message::chars).sum();
        assert!(history_chars <= budget + 400, "within the budget (the note aside): {history_chars}");
        // From the 20th turn on, the room has more than the budget.
        assert!(n < 20 || history_chars >= budget / 2, "not cut far below it: {history_chars}");
        if shared(&pair[0], &pair[1]) < pair[0].len() - 1 {
            moved += 1;
        }
    }
    // Each turn adds two events; the start moves only at every fourth turn (a step of 8).
    assert!(moved > 0 && moved <= 80 / 4 + 1, "the start moved at {moved} of 79 turns");
}

#[test]
fn a_full_fetch_is_trimmed_in_steps_too_and_a_cut_keeps_at_least_the_newest() {
    let sizes = |from: i64, to: i64| (from..=to).map(|seq| (seq, 10)).collect::<Vec<_>>();
    // All fetched, within the budget: all of it.
    assert_eq!(trim_start(&sizes(3, 20), 1_000, true), 0);
    // The fetch was full: from the first multiple of the step, however it slid.
    for first in 3..=8 {
        assert_eq!(trim_start(&sizes(first, first + 200), 10_000, false), usize::try_from(8 - first).expect("n"));
    }
    // One message larger than the budget is still given.
    assert_eq!(trim_start(&[(5, 10_000)], 100, true), 0);
    // No step boundary after the cut: the cut.
    assert_eq!(trim_start(&sizes(1, 7), 30, true), 4);
}

#[test]
fn the_turns_own_messages_come_last_and_are_never_trimmed() {
    // Alice's two long messages waited (pictures for their words) while Bob was answered.
    let long = "x".repeat(600);
    let history = vec![
        ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "old"})),
        ev(2, "@alice:x", json!({"msgtype": "m.text", "body": format!("first {long}")})),
        ev(3, "@alice:x", json!({"msgtype": "m.text", "body": format!("second {long}")})),
        ev(4, "@bob:x", json!({"msgtype": "m.text", "body": "bob's question"})),
        ev(5, "@bot:x", json!({"msgtype": "m.text", "body": "bob's answer"})),
    ];
    let asked = [OwnedEventId::try_from("$e2").expect("id"), OwnedEventId::try_from("$e3").expect("id")];
    let scope = scope(None);
    // A budget smaller than the turn's own two messages: they stay, the older history goes.
    let s = Situation { asked: &asked, ..situation(&scope, 1_273) };
    let msgs = built(&s, &history, &[], &Parts::new());
    let texts: Vec<String> = msgs.iter().skip(1).map(|m| format!("{m:?}")).collect();
    assert_eq!(msgs.len(), 5, "{texts:#?}");
    assert!(texts[0].contains("bob's question") && texts[1].contains("bob's answer"), "{texts:#?}");
    assert!(texts[2].contains("first xx") && texts[3].contains("second xx"), "the turn's own, last: {texts:#?}");
}

#[test]
fn the_note_gives_the_place_the_ids_and_the_rooms_and_the_system_prompt_is_the_same_in_every_room() {
    let history = vec![
        ev(1, "@alice:x", json!({"msgtype": "m.text", "body": "  weather\n in   Lisbon, please, and tomorrow's too?"})),
        ev(2, "@bot:x", json!({"msgtype": "m.text", "body": "Lisbon: 21 °C."})),
        ev(3, "@bot:x", json!({"msgtype": "m.notice", "body": "A notice is no message of the model's."})),
        ev(4, "@alice:x", json!({"msgtype": "m.text", "body": "thanks"})),
    ];
    let dm = scope(None);
    let (msgs, note) = built_with_note(&situation(&dm, 10_000), &history, &[], &Parts::new());
    assert_eq!(
        note,
        format!(
            "{NOTE} Ids for tools: your messages $e2 (\"Lisbon: 21 °C.\"); members' $e1 (\"weather in Lisbon, please, a…\"), $e4 (\"thanks\").]"
        )
    );
    let everywhere = |m: &Message| !format!("{m:?}").contains("$e");
    assert!(msgs.iter().all(everywhere), "no id anywhere else: {msgs:#?}");
    // A group room with a room to name besides it: the note says so; the system prompt is
    // the same as the DM's, byte for byte.
    let group = Scope { room: ruma::owned_room_id!("!g:x"), is_dm: false, ..scope(None) };
    let rooms = crate::tools::RoomChoices { in_dm: false, shared: vec![(ruma::owned_room_id!("!t:x"), "Team".into())] };
    let s = Situation { rooms: &rooms, ..situation(&group, 10_000) };
    let in_group = build(&s, &history, &[], &Parts::new());
    assert_eq!(in_group[0], msgs[0], "the system prompt is the same in every room");
    let Some(Message::User(last)) = in_group.last() else { panic!("a question") };
    assert!(last.contains("In: the group room !g:x (answer the person who addressed you)."), "{last}");
    assert!(
        last.contains(
            "Rooms you may post to besides this chat: \"dm\" (a direct chat with @alice:x); !t:x (named \"Team\")."
        ),
        "{last}"
    );
}
