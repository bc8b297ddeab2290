//! The review's verdicts on answers that would leave a member with nothing, or with
//! richbot's own words: silence, an answer of nothing, a correction repeated, a result
//! read out (each as Qwen2.5-Coder-1.5B wrote it in the answers benchmark).

use super::tests::{reply, tools};
use super::*;
use crate::agent::ToolCall;
use serde_json::json;

#[test]
fn nothing_at_all_after_a_call_that_did_something_is_asked_again_then_the_member_reads_it_is_done() {
    // The Qwen lane (2026-12-07): the reminder set, the model's answer was one token, the end.
    let set = [
        Message::User("@alice:x: Remind me in 30 seconds to stretch.".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "schedule", "{}")] },
        Message::Tool { call_id: "c".into(), content: json!({"id": 1, "next_times": []}).to_string() },
    ];
    let review = Review::default();
    for _ in 0..CORRECTIONS {
        assert_eq!(review.judge(&Reply::default(), &set, &tools()), Verdict::Correct(strings::CORRECT_EMPTY.into()));
    }
    assert_eq!(
        review.judge(&Reply::default(), &set, &tools()),
        Verdict::Replace(strings::DONE_UNSAID.into()),
        "never a false 'I couldn't', nor silence about a reminder set"
    );
    // Silence the model chose ("[no reply]") stays its choice: richbot's own "say
    // something" comes first in a DM, as for any answer.
    let silent = reply(strings::NO_REPLY);
    assert_eq!(Review::new(false).judge(&silent, &set, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    // Nothing done, nothing said: as before, nothing posted.
    let asked = [Message::User("@alice:x: ok".into())];
    assert_eq!(Review::default().judge(&Reply::default(), &asked, &tools()), Verdict::Show(String::new()));
}

#[test]
fn a_correction_repeated_as_the_answer_is_never_posted() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07, the comparison table): told
    // its answer repeated a tool's result, the model answered with the correction itself.
    let copied = "Your last answer repeated a tool's result, which is for you, not the member. Please ask me a \
                  new question.";
    let corrected = [
        Message::User("@alice:x: Compare Python, Rust and Go for web backends in a table.".into()),
        Message::Assistant { text: Some("{\"error\": \"no\", \"code\": \"x\"}".into()), tool_calls: vec![] },
        Message::User(strings::CORRECT_TOOL_RESULT.into()),
    ];
    let review = Review::default();
    for _ in 0..CORRECTIONS {
        assert_eq!(review.judge(&reply(copied), &corrected, &tools()), Verdict::Correct(strings::CORRECT_ECHO.into()));
    }
    assert_eq!(
        review.judge(&reply(copied), &corrected, &tools()),
        Verdict::Replace(strings::COULD_NOT_ANSWER.into()),
        "never posted as it is"
    );
    // After a posted message the answer is out: nothing more is said.
    let out = [
        Message::User("@alice:x: A table of the planets".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool { call_id: "c".into(), content: json!({"event_id": "$t"}).to_string() },
    ];
    assert_eq!(Review::default().judge(&reply(copied), &out, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    // An answer of the member's subject in the same words is not a copy.
    let answer = "Rust is fast, Go is simple, and Python has the most libraries.";
    assert_eq!(Review::default().judge(&reply(answer), &corrected, &tools()), Verdict::Show(answer.into()));
}

#[test]
fn silence_in_a_dm_before_anything_was_posted_is_asked_about_once() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): "[no reply]" to a recipe asked in a DM.
    let asked = [Message::User("@alice:x: Give me a simple pancake recipe.".into())];
    let silent = reply("[no reply]");
    let dm = Review::new(true);
    assert_eq!(dm.judge(&silent, &asked, &tools()), Verdict::Correct(strings::CORRECT_SILENT.into()));
    // Told once, the model may still choose silence: nothing is posted.
    let told = [
        asked[0].clone(),
        Message::Assistant { text: Some("[no reply]".into()), tool_calls: vec![] },
        Message::User(strings::CORRECT_SILENT.into()),
    ];
    assert_eq!(dm.judge(&silent, &told, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    // In a group room a message need not be for the persona; after a posted message the answer is out.
    assert_eq!(Review::new(false).judge(&silent, &asked, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    let out = [
        asked[0].clone(),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool { call_id: "c".into(), content: json!({"event_id": "$t"}).to_string() },
    ];
    assert_eq!(Review::new(true).judge(&silent, &out, &tools()), Verdict::Show(strings::NO_REPLY.into()));
}

#[test]
fn nothing_at_all_after_failed_calls_or_in_a_dm_is_asked_again_then_told() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): four rich_send calls
    // refused for the weather, then an answer of nothing.
    let failed = [
        Message::User("@alice:x: What's the weather like in Porto today?".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool {
            call_id: "c".into(),
            content: json!({"error": "reply_to: not an event id", "code": "invalid_arguments"}).to_string(),
        },
    ];
    let review = Review::default();
    for _ in 0..CORRECTIONS {
        assert_eq!(review.judge(&Reply::default(), &failed, &tools()), Verdict::Correct(strings::CORRECT_EMPTY.into()));
    }
    assert_eq!(review.judge(&Reply::default(), &failed, &tools()), Verdict::Replace(strings::COULD_NOT_ANSWER.into()));
    // In a DM, nothing at all to the member's words is asked about too.
    let asked = [Message::User("@alice:x: Give me a simple pancake recipe.".into())];
    assert_eq!(
        Review::new(true).judge(&Reply::default(), &asked, &tools()),
        Verdict::Correct(strings::CORRECT_EMPTY.into())
    );
}

#[test]
fn a_result_read_out_after_a_call_that_did_something_goes_back() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): the reminder set, its result read out.
    let read_out = "The asker's schedule id is 1, and the next time the scheduled message will be posted is \
                    2026-12-07T18:31:05+00:00. The message will be sent to the member in the chat with room \
                    \"!Fc5nttuqtf1CedAGM_wjoymWUbO3Uh1UMMaJzOMe09I\" in UTC timezone.";
    let set = [
        Message::User("@alice:x: Remind me in 2 minutes to stretch.".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "schedule", "{}")] },
        Message::Tool {
            call_id: "c".into(),
            content: json!({"id": 1, "next_times": ["2026-12-07T18:31:05Z"]}).to_string(),
        },
    ];
    let review = Review::default();
    for _ in 0..CORRECTIONS {
        assert_eq!(
            review.judge(&reply(read_out), &set, &tools()),
            Verdict::Correct(strings::CORRECT_TOOL_RESULT.into())
        );
    }
    assert_eq!(
        review.judge(&reply(read_out), &set, &tools()),
        Verdict::Replace(strings::DONE_UNSAID.into()),
        "the call was made"
    );
    let told = "I'll remind you to stretch at 18:31.";
    assert_eq!(Review::default().judge(&reply(told), &set, &tools()), Verdict::Show(told.into()));
    // With nothing done, a room id in an answer is the member's business (they asked about one).
    let asked = [Message::User("@alice:x: what is !abcdefg:example.org?".into())];
    let answer = "!abcdefg:example.org is a room id.";
    assert_eq!(Review::default().judge(&reply(answer), &asked, &tools()), Verdict::Show(answer.into()));
}

#[test]
fn no_reply_in_words_after_a_failed_call_is_not_an_answer_to_the_question() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): a card refused for the
    // weather, then "No reply.", which the member read.
    let failed = [
        Message::User("@alice:x: What's the weather like in Porto today?".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool {
            call_id: "c".into(),
            content: json!({"error": "blocks[0].text: unknown field", "code": "invalid_payload"}).to_string(),
        },
    ];
    let review = Review::default();
    assert_eq!(
        review.judge(&reply("No reply."), &failed, &tools()),
        Verdict::Correct(strings::CORRECT_BARE_NO_REPLY.into())
    );
    // To a question with no call made, it may be the answer.
    let question = [Message::User("@alice:x: Did Bob write back?".into())];
    assert_eq!(Review::default().judge(&reply("No reply."), &question, &tools()), Verdict::Show("No reply.".into()));
}
