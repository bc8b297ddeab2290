//! The review's verdicts on what small models answer.

use super::*;
use crate::agent::ToolCall;
use serde_json::json;

pub(super) fn reply(text: &str) -> Reply {
    Reply { text: Some(text.to_owned()), ..Reply::default() }
}

pub(super) fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec { name: "schedule".into(), description: String::new(), parameters: json!({}) }]
}

#[test]
fn a_clean_answer_is_shown_cleaned_and_a_call_replys_text_is_never_judged() {
    let review = Review::default();
    let asked = [Message::User("@alice:x: hello".into())];
    assert_eq!(review.judge(&reply("Hi!\n[event_id: $x]"), &asked, &tools()), Verdict::Show("Hi!".into()));
    let calling = Reply { tool_calls: vec![ToolCall::new("c", "schedule", "{}")], ..reply("Reminder set!") };
    assert_eq!(review.judge(&calling, &asked, &tools()), Verdict::Show("Reminder set!".into()));
    assert_eq!(review.judge(&Reply::default(), &asked, &tools()), Verdict::Show(String::new()), "no text");
}

#[test]
fn after_a_posted_message_no_reply_in_any_form_is_nothing_to_post() {
    let review = Review::default();
    let turn = [
        Message::User("@alice:x: A table of the planets".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool { call_id: "c".into(), content: json!({"event_id": "$t"}).to_string() },
    ];
    for answer in ["No reply.", "no reply", "To end your turn, type exactly [no reply].", "[No reply]"] {
        assert_eq!(review.judge(&reply(answer), &turn, &tools()), Verdict::Show(strings::NO_REPLY.into()), "{answer}");
    }
    let explained = "This tool response indicates that the message was successfully posted. The `event_id` is \
                     a unique identifier for the event.";
    assert_eq!(review.judge(&reply(explained), &turn, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    let explained = "The tool response means your message is in the room.";
    assert_eq!(review.judge(&reply(explained), &turn, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    // A refusal right after the poll it made was posted (the answers benchmark, seed 3).
    for refusal in ["I'm sorry, but I can't assist with that.", "I cannot help with this request"] {
        assert_eq!(review.judge(&reply(refusal), &turn, &tools()), Verdict::Show(strings::NO_REPLY.into()));
    }
    let toolbox = reply("A hammer is the tool responsible for most of it.");
    assert_eq!(review.judge(&toolbox, &turn, &tools()), Verdict::Show(toolbox.text.clone().unwrap_or_default()));
    // Before anything was posted, "No reply." may be the answer to a question.
    let question = [Message::User("@alice:x: Did Bob write back?".into())];
    assert_eq!(review.judge(&reply("No reply."), &question, &tools()), Verdict::Show("No reply.".into()));
}

#[test]
fn the_note_before_the_question_asks_for_nothing() {
    let review = Review::default();
    let noted = "[Now: 2026-12-06T18:05Z. Ids for tools: members' $a (\"Remind me in 1 minute to str…\").]\n\
                 @alice:x: Thanks! What's a good stretch for the back?";
    let asked = [Message::User(noted.into())];
    let answer = reply("Lie on your back and pull one knee to your chest.");
    assert_eq!(review.judge(&answer, &asked, &tools()), Verdict::Show(answer.text.clone().unwrap_or_default()));
    let asking = [Message::User(noted.replace("Thanks! What's a good stretch", "Remind me in 2 minutes to stretch"))];
    assert!(matches!(review.judge(&answer, &asking, &tools()), Verdict::Correct(_)), "the question itself still asks");
}

#[test]
fn a_copied_tool_result_is_never_shown() {
    let review = Review::default();
    let error = r#"{"error":"unknown argument \"buttons\" (allowed: payload, fallback)","code":"invalid_arguments","path":"buttons"}"#;
    let turn = [
        Message::User("@alice:x: Compare Python and Rust in a table.".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool { call_id: "c".into(), content: error.into() },
    ];
    for answer in [error.to_owned(), format!("Here you go: {error}")] {
        assert_eq!(
            review.judge(&reply(&answer), &turn, &tools()),
            Verdict::Correct(strings::CORRECT_TOOL_RESULT.into())
        );
    }
    // One copied from an earlier answer (not in this turn's results) too.
    let fresh = Review::default();
    let earlier = r#"{"error":"unknown argument \"series\"","code":"invalid_arguments","path":"series"}"#;
    assert!(matches!(fresh.judge(&reply(earlier), &turn[..1], &tools()), Verdict::Correct(_)));
    // Prose about an error is prose; so is JSON that is no result of ours.
    assert_eq!(
        fresh.judge(&reply("That gave an error, sorry."), &turn, &tools()),
        Verdict::Show("That gave an error, sorry.".into())
    );
    let json = "```json\n{\"error\": null, \"note\": 1}\n```";
    assert_eq!(fresh.judge(&reply(json), &turn[..1], &tools()), Verdict::Show(json.into()));
    // A result made up in its shape, fenced or not (after a failed call), or in the tags
    // a template wraps results in.
    for made_up in [
        "```\n{\n  \"event_id\": \"null\",\n  \"next_times\": []\n}\n```",
        r#"{"event_id": "$x"}"#,
        // Half a result, half a rich message's arguments (the benchmark's countdown).
        r#"{"event_id": "1", "fallback": "Countdown: New Year 2027 is in 9 months, 2 days, and 1 hour."}"#,
        "<tool_response>Try again with the weather temperature as a number.</tool_response>",
    ] {
        assert_eq!(
            Review::default().judge(&reply(made_up), &turn[..1], &tools()),
            Verdict::Correct(strings::CORRECT_TOOL_RESULT.into()),
            "{made_up}"
        );
    }
    // JSON a member asked for is not a result.
    let config = "```json\n{\"id\": 7, \"name\": \"x\"}\n```";
    assert_eq!(Review::default().judge(&reply(config), &turn[..1], &tools()), Verdict::Show(config.into()));
}

#[test]
fn an_error_retold_in_words_or_a_member_sent_to_a_tool_goes_back_to_the_model() {
    let error = r#"{"error":"unknown argument \"blocks\" (allowed: payload, fallback, reply_to, thread, room)","code":"invalid_arguments","path":"blocks"}"#;
    let turn = [
        Message::User("@alice:x: Compare Python, Rust and Go in a table.".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool { call_id: "c".into(), content: error.into() },
    ];
    let retold = reply("Error: unknown argument \"blocks\" (allowed: payload, fallback, reply_to, thread, room)");
    assert_eq!(
        Review::default().judge(&retold, &turn, &tools()),
        Verdict::Correct(strings::CORRECT_TOOL_RESULT.into())
    );
    for sent in [
        "To determine the current weather in Porto, please use the `weather` function.",
        "To create a chart of the monthly sales data, please use the chart tool.",
        "To create a simple pancake recipe, please use the recipe function.",
    ] {
        assert_eq!(
            Review::default().judge(&reply(sent), &turn[..1], &tools()),
            Verdict::Correct(strings::CORRECT_MEMBER_CANNOT_CALL.into()),
            "{sent}"
        );
    }
    // Advice about software is an answer.
    let advice = reply("In Python, use the sorted function with a key.");
    assert_eq!(
        Review::default().judge(&advice, &turn[..1], &tools()),
        Verdict::Show(advice.text.clone().unwrap_or_default())
    );
}

#[test]
fn unreadable_calls_empty_answers_and_broken_promises_are_corrected_twice_then_replaced() {
    let review = Review::default();
    let asked = [Message::User("@alice:x: Remind me in 2 minutes to stretch".into())];
    let unreadable = Reply { unreadable_text: true, ..reply("```json\n{\"name\": \"schedule\"") };
    assert_eq!(review.judge(&unreadable, &asked, &tools()), Verdict::Correct(strings::CORRECT_WRITTEN_CALL.into()));
    let empty = reply("[Now: 2026-12-06T10:00Z. Asked by: @alice:x.]");
    assert_eq!(review.judge(&empty, &asked, &tools()), Verdict::Correct(strings::CORRECT_EMPTY.into()));
    let promise = reply("Reminder: Stretch in 2 minutes.");
    assert_eq!(review.judge(&promise, &asked, &tools()), Verdict::Replace(strings::PROMISE_NOT_KEPT.into()));
    let fresh = Review::default();
    let Verdict::Correct(told) = fresh.judge(&promise, &asked, &tools()) else { panic!("corrected") };
    assert!(told.contains("schedule"), "{told}");
}

#[test]
fn an_answer_that_only_asks_the_member_to_wait_goes_back_to_the_model() {
    let turn = [Message::User("@alice:x: What's the weather like in Porto today?".into())];
    for deferred in [
        "To find the current weather in Porto, please wait a moment.",
        "Let me check that for you.",
        "One moment, please! I'll get back to you.",
    ] {
        assert_eq!(
            Review::default().judge(&reply(deferred), &turn, &tools()),
            Verdict::Correct(strings::CORRECT_DEFERRED.into()),
            "{deferred}"
        );
    }
    // An answer that says "let me check" on its way to the answer is the answer.
    let answered = "Let me check: Porto in December is usually mild, around 10-15 °C, with rain most weeks. \
                    For today's weather, a forecast site or app will have the live figures.";
    assert_eq!(Review::default().judge(&reply(answered), &turn, &tools()), Verdict::Show(answered.into()));
    // Words that only look alike are an answer.
    let advice = "Wait times in Porto's airport are short in December.";
    assert_eq!(Review::default().judge(&reply(advice), &turn, &tools()), Verdict::Show(advice.into()));
}

#[test]
fn no_reply_without_its_brackets_before_anything_is_posted_is_asked_again_then_nothing() {
    let turn = [Message::User("@alice:x: Thanks, you're very helpful!".into())];
    let review = Review::default();
    for _ in 0..2 {
        assert_eq!(
            review.judge(&reply("No reply."), &turn, &tools()),
            Verdict::Correct(strings::CORRECT_BARE_NO_REPLY.into())
        );
    }
    assert_eq!(
        review.judge(&reply("no reply"), &turn, &tools()),
        Verdict::Replace(strings::NO_REPLY.into()),
        "never posted as it is: the marker, which posts nothing"
    );
    // Words around it are an answer.
    let answer = "No reply is needed, you're welcome!";
    assert_eq!(Review::default().judge(&reply(answer), &turn, &tools()), Verdict::Show(answer.into()));
}

#[test]
fn silence_chosen_after_a_correction_with_nothing_posted_is_the_honest_sentence() {
    let asked = Message::User("@alice:x: What's the weather like in Porto today?".into());
    let deferred = Message::Assistant { text: Some("Please wait a moment.".into()), tool_calls: Vec::new() };
    let told = Message::User(strings::CORRECT_DEFERRED.into());
    let turn = [asked.clone(), deferred, told];
    assert_eq!(
        Review::default().judge(&reply("[No reply.]"), &turn, &tools()),
        Verdict::Replace(strings::COULD_NOT_ANSWER.into())
    );
    // Without a correction, the marker is the model's to give ("ok" needs no answer).
    assert_eq!(Review::default().judge(&reply("[no reply]"), &[asked], &tools()), Verdict::Show("[no reply]".into()));
}

#[test]
fn word_salad_is_asked_again_before_anything_is_out_and_ends_the_turn_quietly_after() {
    let salad = |mean: f64| Reply {
        odds: Some(crate::agent::Odds { tokens: 30, sum: 30.0 * mean }),
        ..reply("antonopoulos) WebSite comp.lang.Overrideumo Bayern Sachs0]outeça500an")
    };
    let review = Review::default();
    let asked = [Message::User("@alice:x: What's the weather in Porto?".into())];
    assert_eq!(review.judge(&salad(-4.7), &asked, &tools()), Verdict::Correct(strings::CORRECT_BABBLE.into()));
    // The same words, likely by the model's odds (a made-up language it was asked for), are shown.
    let likely = salad(-0.9);
    assert!(matches!(review.judge(&likely, &asked, &tools()), Verdict::Show(_)));
    assert_eq!(review.judge(&salad(-4.7), &asked, &tools()), Verdict::Correct(strings::CORRECT_BABBLE.into()));
    assert_eq!(
        review.judge(&salad(-4.7), &asked, &tools()),
        Verdict::Replace(strings::COULD_NOT_ANSWER.into()),
        "after the turn's corrections, the member reads one honest sentence"
    );
    let out = [
        Message::User("@alice:x: A table of the planets".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool { call_id: "c".into(), content: json!({"event_id": "$t"}).to_string() },
    ];
    assert_eq!(review.judge(&salad(-6.0), &out, &tools()), Verdict::Show(strings::NO_REPLY.into()));
}

#[test]
fn a_tool_error_retold_to_the_member_goes_back_and_a_payload_spoken_of_otherwise_is_shown() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): its written weather call
    // was refused for `"temp": "23°C"`, and it told the member to fix it.
    let retold = "There was an issue with the payload for the `weather` block. The temperature should be an \
                  integer or decimal string. Please correct it to a valid number.";
    let failed = [
        Message::User("@alice:x: What's the weather like in Porto today?".into()),
        Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] },
        Message::Tool {
            call_id: "c".into(),
            content:
                json!({"error": "blocks[0].temp: must be an integer or a decimal string", "code": "invalid_payload"})
                    .to_string(),
        },
    ];
    let review = Review::default();
    assert_eq!(review.judge(&reply(retold), &failed, &tools()), Verdict::Correct(strings::CORRECT_TOOL_RESULT.into()));
    // The answers benchmark (seed 3): its weather block had `"temp": null`, and the member
    // was asked to provide what the model's call missed.
    let missing = [
        failed[0].clone(),
        failed[1].clone(),
        Message::Tool {
            call_id: "c".into(),
            content:
                json!({"error": "blocks[0] (weather): missing required field \"temp\"", "code": "invalid_payload"})
                    .to_string(),
        },
    ];
    let asks = "To get the weather, you need to provide the temperature.";
    assert_eq!(review.judge(&reply(asks), &missing, &tools()), Verdict::Correct(strings::CORRECT_TOOL_RESULT.into()));
    let honest = "I can't look up today's weather in Porto: I have no weather source.";
    assert_eq!(Review::default().judge(&reply(honest), &missing, &tools()), Verdict::Show(honest.into()));
    let clarifies = "Which city do you mean? Please provide its name.";
    assert_eq!(Review::default().judge(&reply(clarifies), &missing, &tools()), Verdict::Show(clarifies.into()));
    // With no call failed, a payload is the member's subject (an HTTP question).
    let asked = [Message::User("@alice:x: What is a JSON payload?".into())];
    let answer = "A payload is the data a request carries, such as a JSON object in a POST body.";
    assert_eq!(review.judge(&reply(answer), &asked, &tools()), Verdict::Show(answer.into()));
}
