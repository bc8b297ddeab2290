//! The promises a small model made that no tool kept (Qwen2.5-Coder-1.5B wrote the first
//! case word for word), and answers that keep or decline theirs.

use serde_json::json;

use super::*;
use crate::agent::ToolCall;

fn tools() -> Vec<ToolSpec> {
    ["rich_send", "rich_poll", "schedule", "unschedule"]
        .iter()
        .map(|n| ToolSpec { name: (*n).into(), description: String::new(), parameters: json!({}) })
        .collect()
}

/// A turn that called `tool`, with `result`.
fn called(tool: &str, result: serde_json::Value) -> Vec<Message> {
    vec![
        Message::User("@alice:x: remind me".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c1", tool, "{}")] },
        Message::Tool { call_id: "c1".into(), content: result.to_string() },
    ]
}

#[test]
fn a_reminder_poll_or_message_claimed_without_its_tool_is_caught() {
    let none: Vec<Message> = Vec::new();
    let cases = [
        ("Reminder: Stretch in 2 minutes.", "Remind me in 2 minutes to stretch", "schedule"),
        ("Sure! I'll remind you to stretch in 2 minutes.", "stretch later?", "schedule"),
        ("Your reminder is set for 9:00.", "thanks", "schedule"),
        ("Done, I've scheduled it for Monday.", "every monday post the summary", "schedule"),
        ("Stretching is good for you!", "Remind me to stretch in 2 minutes", "schedule"),
        ("Pizza or sushi? Reply with your choice!", "Make a poll: pizza or sushi?", "rich_poll"),
        ("The poll is up, vote now.", "lunch?", "rich_poll"),
        ("I've sent the summary to the team room.", "send it to the team", "rich_send"),
        ("I posted a rich message to the chat with the chart.", "Chart these sales", "rich_send"),
        ("I cancelled your reminder.", "stop reminding me", "unschedule"),
    ];
    for (answer, asked, tool) in cases {
        let unkept = unkept(answer, asked, &none, &tools()).unwrap_or_else(|| panic!("{answer:?} slipped through"));
        assert_eq!(unkept.tool, tool, "{answer:?}");
        // Whether the member asked for it (the model is told so, not what it said).
        assert_eq!(unkept.asked, asked.starts_with("Remind me") || asked.starts_with("Make a poll"), "{answer:?}");
    }
}

#[test]
fn a_promise_kept_by_its_tool_declined_or_never_made_is_no_broken_promise() {
    let none: Vec<Message> = Vec::new();
    let kept = called("schedule", json!({"id": 4, "next": ["2026-12-06T10:02:00+00:00"]}));
    assert_eq!(unkept("I'll remind you in 2 minutes.", "Remind me in 2 minutes to stretch", &kept, &tools()), None);
    let failed = called("schedule", json!({"error": "at is in the past", "code": "invalid_arguments"}));
    assert!(
        unkept("Reminder set!", "Remind me in 2 minutes", &failed, &tools()).is_some(),
        "a failed call keeps nothing"
    );
    for (answer, asked) in [
        ("Sorry, I can't set reminders here.", "Remind me in 2 minutes to stretch"),
        ("Here's how to make pancakes: mix flour, eggs and milk.", "Remind me how to make pancakes"),
        ("Lisbon is the capital of Portugal.", "Qual é a capital de Portugal?"),
        ("A poll is a vote among a group.", "what is a poll?"),
    ] {
        assert_eq!(unkept(answer, asked, &none, &tools()), None, "{answer:?}");
    }
    let no_schedule_tool: Vec<ToolSpec> = tools().into_iter().filter(|t| t.name != "schedule").collect();
    assert_eq!(unkept("Reminder: stretch.", "Remind me to stretch", &none, &no_schedule_tool), None, "not offered");
}

#[test]
fn a_message_said_to_be_sent_is_kept_by_a_schedule_or_a_poll_too() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07), of the reminder it had just set.
    let answer = "The message was posted to the room and will be repeated at 2026-12-07T17:51:24+00:00.";
    let asked = "Remind me in 2 minutes to stretch.";
    let set = called("schedule", json!({"id": 1, "next_times": ["2026-12-07T17:51:24Z"]}));
    assert_eq!(unkept(answer, asked, &set, &tools()), None);
    let polled = called("rich_poll", json!({"event_id": "$p", "poll": 1}));
    assert_eq!(unkept("I've posted the poll.", "a poll: pizza or sushi?", &polled, &tools()), None);
    // With nothing done, the same words are a promise no tool kept.
    let broken = unkept(answer, "ok", &[], &tools()).expect("unkept");
    assert_eq!(broken.tool, "rich_send");
}
