//! Calls written as text, in the forms real models write them (Qwen2.5-Coder-1.5B on
//! llama.cpp wrote every one of these), and prose that only looks close.

use serde_json::json;

use super::*;

fn tools() -> Vec<ToolSpec> {
    let spec = |name: &str, props: Value, required: Value| ToolSpec {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": props, "required": required}),
    };
    vec![
        spec(
            "rich_send",
            json!({"payload": {}, "fallback": {}, "room": {}, "reply_to": {}}),
            json!(["payload", "fallback"]),
        ),
        spec(
            "rich_edit",
            json!({"event_id": {}, "payload": {}, "fallback": {}}),
            json!(["event_id", "payload", "fallback"]),
        ),
        spec("schedule", json!({"at": {}, "every": {}, "message": {}, "prompt": {}}), json!([])),
        spec("unschedule", json!({"id": {}}), json!(["id"])),
    ]
}

const ARGS: &str = r#"{"payload": {"v": 1, "blocks": [{"type": "code", "code": "x"}]}, "fallback": "x"}"#;

fn calls(text: &str) -> (Vec<(String, Value)>, Option<String>) {
    match read(text, &tools(), 2) {
        Read::Calls { calls, rest } => (
            calls.into_iter().map(|c| (c.name, serde_json::from_str(&c.arguments).expect("JSON arguments"))).collect(),
            rest,
        ),
        other => panic!("no calls in {text:?}: {other:?}"),
    }
}

fn args() -> Value {
    serde_json::from_str(ARGS).expect("args")
}

#[test]
fn every_written_form_of_a_call_is_read_as_that_call() {
    let forms = [
        format!(r#"{{"name": "rich_send", "arguments": {ARGS}}}"#),
        format!("```json\n{{\"name\": \"rich_send\", \"arguments\": {ARGS}}}\n```"),
        format!("```\n{{\"name\": \"rich_send\", \"parameters\": {ARGS}}}\n```"),
        format!("<tool_call>\n{{\"name\": \"rich_send\", \"arguments\": {ARGS}}}\n</tool_call>"),
        format!("<tools>{{\"name\": \"rich_send\", \"arguments\": {ARGS}}}</tools>"),
        format!("<rich_send>{ARGS}</rich_send>"),
        format!("<rich_send>\n{ARGS}"),
        format!(r#"{{{{"name": "rich_send", "arguments": {ARGS}}}}}"#),
        format!(r#"{{"function": {{"name": "rich_send", "arguments": {}}}}}"#, serde_json::to_string(ARGS).expect("s")),
        ARGS.to_owned(),
        format!("```json\n{ARGS}\n```"),
    ];
    for text in forms {
        let (found, rest) = calls(&text);
        assert_eq!(found, [("rich_send".to_owned(), args())], "{text}");
        assert_eq!(rest, None, "{text}");
    }
}

#[test]
fn the_prose_around_a_call_is_kept_apart_and_several_calls_are_read_in_order() {
    let text = format!(
        "Here is the table you asked for.\n```json\n[{{\"name\": \"rich_send\", \"arguments\": {ARGS}}}, \
         {{\"name\": \"unschedule\", \"arguments\": {{\"id\": 4}}}}]\n```\nAnything else?"
    );
    let (found, rest) = calls(&text);
    assert_eq!(found.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["rich_send", "unschedule"]);
    assert_eq!(rest.as_deref(), Some("Here is the table you asked for.\n\nAnything else?"));
    let inline = format!(r#"Sure! {{"name": "rich_send", "arguments": {ARGS}}} Done."#);
    let (found, rest) = calls(&inline);
    assert_eq!(found, [("rich_send".to_owned(), args())]);
    assert_eq!(rest.as_deref(), Some("Sure!  Done."));
    // A rich message's bare arguments with prose around them, as Qwen wrote them.
    for text in [
        format!("Here is the updated rich message with the new chart:\n\n{ARGS}\n\nEnjoy!"),
        format!("Here is the chart:\n```json\n{ARGS}\n```\nEnjoy!"),
    ] {
        let (found, rest) = calls(&text);
        assert_eq!(found, [("rich_send".to_owned(), args())], "{text}");
        assert!(rest.as_deref().is_some_and(|r| r.starts_with("Here is") && r.ends_with("Enjoy!")), "{rest:?}");
    }
    let Read::Calls { calls, .. } = read(&format!("<rich_send>{ARGS}</rich_send>"), &tools(), 3) else { panic!() };
    assert_eq!(calls[0].id, "written_3_0", "ids by round and place");
}

#[test]
fn prose_that_mentions_a_tool_or_shows_json_is_prose() {
    for text in [
        "I can post that with rich_send if you like.",
        "Use the `schedule` tool to set reminders.",
        "```json\n{\"name\": \"Alice\", \"age\": 31}\n```",
        "```python\nprint({\"name\": \"rich_send\"})\n```",
        "The config takes {\"fallback\": \"x\"} inside a sentence.",
        "[1, 2, 3]",
        "```json\n{\"payload\": 1}\n```\nis how the field looks.",
        // Other bare arguments are a call only alone: this is an answer showing JSON.
        "An id looks like this:\n```json\n{\"id\": 4}\n```",
        // ... or when the prose names their tool; naming another is no call.
        "To unscheduled it:\n```json\n{\"id\": 4}\n```",
        "Use schedule with:\n```json\n{\"id\": 4}\n```",
        // A tool that requires nothing: one key alone is too little to be its call.
        "```json\n{\"at\": \"in 1 minute\"}\n```",
    ] {
        assert_eq!(read(text, &tools(), 1), Read::Prose, "{text}");
    }
}

#[test]
fn a_call_to_an_offered_tool_that_cannot_be_read_is_unreadable_not_prose() {
    for text in [
        "```json\n{\"name\": \"rich_send\", \"arguments\": {\"payload\": {\"v\": 1,}\n```",
        "<rich_send>payload: weather in Lisbon</rich_send>",
        "<tool_call>{\"name\": \"rich_send\", \"arguments\": 7}</tool_call>",
    ] {
        assert_eq!(read(text, &tools(), 1), Read::Unreadable, "{text}");
    }
    // A whole answer that plainly calls something not offered (a block type, a tool it
    // imagines) is that call, for the turn to answer; inside prose it is prose.
    for (text, name) in [
        ("{{\"name\": \"weather\", \"arguments\": {\"location\": \"Porto\", \"temp\": null}}", "weather"),
        ("<tool_call>{\"name\": \"web_search\", \"arguments\": {\"q\": \"x\"}}</tool_call>", "web_search"),
        ("```json\n{\"name\": \"web_search\", \"parameters\": {}}\n```", "web_search"),
    ] {
        let Read::Calls { calls, rest: None } = read(text, &tools(), 1) else { panic!("a call: {text}") };
        assert_eq!(calls[0].name, name, "{text}");
    }
    let shown = "An OpenAI tool call looks like {\"name\": \"web_search\", \"arguments\": {\"q\": \"x\"}} in the API.";
    assert_eq!(read(shown, &tools(), 1), Read::Prose);
    // On lines of its own between prose it is a call (Qwen, asked for the weather).
    let meant = "Let's call the weather function with the location as \"Porto\".\n\n{\n  \"name\": \"weather\",\n  \"arguments\": {\n    \"location\": \"Porto\"\n  }\n}\n\nThis will send a rich message.";
    let Read::Calls { calls, .. } = read(meant, &tools(), 1) else { panic!("a call: {meant}") };
    assert_eq!(calls[0].name, "weather");
    assert_eq!(shown_until(&meant[..meant.find("\"name").unwrap_or(0)], &tools()), meant.find('{').unwrap_or(0));
}

#[test]
fn what_streams_is_shown_up_to_where_a_call_may_start() {
    let t = tools();
    assert_eq!(shown_until("The weather is mild.", &t), "The weather is mild.".len());
    assert_eq!(shown_until("{\"name\": \"rich_s", &t), 0);
    assert_eq!(shown_until("  ```json\n{", &t), 2);
    assert_eq!(shown_until("Sure.\n<rich_send>{\"pay", &t), "Sure.\n".len());
    assert_eq!(shown_until("Sure.\n<rich_s", &t), "Sure.\n".len(), "a tag being typed");
    assert_eq!(shown_until("a < b and c > d", &t), "a < b and c > d".len());
    assert_eq!(shown_until("<tool_response>\n{\"event_id\"", &t), 0, "a template's tag");
    // A lead-in waits for what it leads in to: a call's narration is never shown.
    assert_eq!(shown_until("Here's the payload you need:", &t), 0);
    assert_eq!(shown_until("Sure.\nHere's the payload you need:\n\n```json\n{", &t), "Sure.\n".len());
    let listed = "Steps:\n- mix";
    assert_eq!(shown_until(listed, &t), listed.len(), "once it goes on, it is shown");
}

#[test]
fn bare_arguments_are_the_call_of_the_tool_the_prose_names() {
    // Qwen2.5-Coder, asked for a reminder.
    let text = "To remind you in 1 minute to stretch, use the `schedule` function with the parameters:\n```json\n{\n  \"at\": \"in 1 minute\",\n  \"message\": \"Stretch your legs!\"\n}\n```\nThis will schedule a reminder.";
    let (named, _) = calls(text);
    assert_eq!(named, [("schedule".to_owned(), json!({"at": "in 1 minute", "message": "Stretch your legs!"}))]);
    // Alone, a tool's bare arguments are its call even when it requires none.
    let (alone, rest) = calls("{\"at\": \"in 1 minute\", \"message\": \"Stretch!\"}");
    assert_eq!(alone.len(), 1);
    assert_eq!(rest, None);
}

#[test]
fn a_payload_written_alone_is_a_rich_message() {
    // Qwen, asked for a chart, answered with the payload alone.
    let text = "{\n  \"blocks\": [\n    {\n      \"type\": \"chart\",\n      \"series\": [{\"name\": \"Sales\", \"values\": [120, 135]}]\n    }\n  ]\n}";
    let (named, rest) = calls(text);
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].0, "rich_send");
    assert_eq!(named[0].1["payload"]["blocks"][0]["type"], "chart");
    assert_eq!(rest, None);
    // Inside a sentence it is prose; so is an object that only has blocks among others.
    assert_eq!(read("The payload is {\"blocks\": []} in v1.", &tools(), 1), Read::Prose);
    assert_eq!(read("{\"blocks\": [{\"type\": \"x\"}], \"user\": 1}", &tools(), 1), Read::Prose);
}

#[test]
fn a_payload_with_its_fallback_beside_the_blocks_is_a_rich_message() {
    // The answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07): rich_send's arguments
    // flattened, in a bare fence, for a table, a chart and a countdown alike.
    let text = "```\n{\n  \"blocks\": [\n    {\n      \"type\": \"table\",\n      \"columns\": [\"Language\", \"Framework\"],\n      \"rows\": [\n        [\"Python\", \"Flask\"],\n        [\"Rust\", \"Rocket\"]\n      ]\n    }\n  ],\n  \"fallback\": \"Compare Python, Rust and Go for web backends in a table.\"\n}\n```";
    let (named, rest) = calls(text);
    assert_eq!(named.len(), 1, "{named:?}");
    assert_eq!(named[0].0, "rich_send");
    assert_eq!(named[0].1["payload"]["blocks"][0]["type"], "table");
    assert_eq!(named[0].1["payload"].get("fallback"), None, "the fallback is an argument, not the payload's");
    assert_eq!(named[0].1["fallback"], "Compare Python, Rust and Go for web backends in a table.");
    assert_eq!(rest, None);
    // A fallback that is no text is no rich message's.
    assert_eq!(read("{\"blocks\": [{\"type\": \"x\"}], \"fallback\": 1}", &tools(), 1), Read::Prose);
}

#[test]
fn a_rich_messages_arguments_without_a_fallback_are_its_call() {
    // Qwen, asked for a countdown: rich_send's arguments alone, with no fallback.
    let text = "{ \"reply_to\": \"$q\", \"payload\": { \"v\": 1, \"blocks\": [ { \"type\": \"countdown\", \"until\": \"2027-01-01T00:00:00Z\" } ] } }";
    let (named, rest) = calls(text);
    assert_eq!(named.len(), 1, "{text}");
    assert_eq!(named[0].0, "rich_send");
    assert_eq!(named[0].1["reply_to"], "$q");
    assert_eq!(rest, None);
}

#[test]
fn a_payload_written_in_place_of_a_rich_messages_arguments_is_put_under_payload() {
    // Qwen, asked for a table: rich_send's call with the payload as its arguments.
    let text = "```json\n{\n  \"name\": \"rich_send\",\n  \"arguments\": {\n    \"v\": 1,\n    \"blocks\": [{\"type\": \"table\", \"columns\": [\"A\"], \"rows\": [[\"x\"]]}],\n    \"fallback\": \"x\"\n  }\n}\n```";
    let (named, _) = calls(text);
    assert_eq!(named.len(), 1, "{text}");
    assert_eq!(named[0].1["payload"]["blocks"][0]["type"], "table");
    assert_eq!(named[0].1["payload"]["v"], 1);
    assert_eq!(named[0].1["fallback"], "x");
    assert!(named[0].1.get("blocks").is_none(), "{}", named[0].1);
    // A call with its payload in place is as written; so is another tool's `blocks`.
    assert_eq!(calls(&format!("{{\"name\": \"rich_send\", \"arguments\": {ARGS}}}")).0[0].1, args());
    let other = calls("{\"name\": \"schedule\", \"arguments\": {\"blocks\": [1], \"at\": \"in 1 minute\"}}");
    assert_eq!(other.0[0].1["blocks"], serde_json::json!([1]));
}

#[test]
fn a_rich_message_in_tool_response_tags_with_escaped_quotes_is_its_call() {
    // Qwen, after playing the tool once, wrote its table so.
    let text = r#"<tool_response>{\"payload\": {\"v\": 1, \"blocks\": [{\"type\": \"table\", \"columns\": [\"Language\"], \"rows\": [["Python"]]}]}, \"fallback\": \"Python\"}</tool_response>"#;
    let (named, rest) = calls(text);
    assert_eq!(named.len(), 1, "{text}");
    assert_eq!(named[0].0, "rich_send");
    assert_eq!(named[0].1["payload"]["blocks"][0]["rows"][0][0], "Python");
    assert_eq!(rest, None);
    // Prose in the tags is no call (the review keeps it from the member).
    assert_eq!(read("<tool_response>Try again with the temperature.</tool_response>", &tools(), 1), Read::Prose);
}

#[test]
fn a_block_called_with_arguments_in_a_fence_between_prose_is_a_call() {
    // Qwen2.5-Coder-1.5B, the benchmark's first question, word for word (twice the same
    // fence, and prose around it).
    let fence = "```json\n{\n  \"name\": \"weather\",\n  \"arguments\": {\n    \"location\": \"Porto\",\n    \"temp\": true,\n    \"tz\": \"America/New_York\"\n  }\n}\n```";
    let text = format!(
        "To provide a response, I need to retrieve the weather information for Porto.\n\n{fence}\n\nThe response \
         will be a JSON object.\n\n{fence}\n\nThe final response should include the weather information."
    );
    let (found, rest) = calls(&text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().all(|(name, args)| name == "weather" && args["location"] == "Porto"), "{found:?}");
    assert!(rest.is_some_and(|r| !r.contains("\"name\"")), "the prose alone is left");
    // A name that is no block and no tool, between prose, is still an example.
    let example =
        "A function call looks like:\n```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```\nin OpenAI's API.";
    assert_eq!(read(example, &tools(), 1), Read::Prose);
}

#[test]
fn a_rich_message_in_arguments_broken_elsewhere_is_its_call_and_never_posted_raw() {
    // Qwen2.5-Coder-1.5B, the benchmark's countdown: the note's ids copied into `thread`,
    // quotes and all, then a valid payload.
    let text = r#"{"reply_to": "I couldn't put an answer together.", "room": "a direct chat with @alice:localhost", "thread": "your messages $Mw ($I couldn't…), $f6 ($Sorry, but…"), "event_id": "34567890", "payload": {"v": 1, "blocks": [{"type": "countdown", "until": "2027-01-01T00:00:00Z"}]}, "fallback": "Countdown until New Year 2027""#;
    let (found, rest) = calls(text);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "rich_send");
    assert_eq!(found[0].1["payload"]["blocks"][0]["type"], "countdown");
    assert_eq!(found[0].1["fallback"], "Countdown until New Year 2027");
    assert!(found[0].1.get("thread").is_none(), "nothing of the broken arguments: {:?}", found[0].1);
    assert_eq!(rest, None);
    // Broken past reading, with a rich message's keys: never prose.
    let broken = r#"{"payload": {"v": 1, "blocks": [{"type": "countdown", "until": "#;
    assert_eq!(read(broken, &tools(), 1), Read::Unreadable);
}

#[test]
fn a_whole_answer_written_as_a_python_call_is_that_call_and_is_never_shown_being_typed() {
    // Both from the answers benchmark (Qwen2.5-Coder-1.5B, 2026-12-07), posted as text then.
    let (found, rest) = calls(r#"countdown(until="2027-01-01T00:00:00Z")"#);
    assert_eq!(found, [("countdown".to_owned(), json!({"until": "2027-01-01T00:00:00Z"}))]);
    assert_eq!(rest, None);
    let (found, _) = calls(r#"rich_send(payload={"blocks":[{"type":"code","code":"def r(s): return s[::-1]"}]})"#);
    assert_eq!(
        found,
        [(
            "rich_send".to_owned(),
            json!({"payload": {"blocks": [{"type": "code", "code": "def r(s): return s[::-1]"}]}})
        )]
    );
    assert_eq!(read("rich_send(payload={\"blocks\": [", &tools(), 1), Read::Unreadable);
    assert_eq!(read("Call countdown(until=\"2027\") for that.", &tools(), 1), Read::Prose);
    assert_eq!(shown_until("countdown(until=\"2027-01", &tools()), 0);
    assert_eq!(shown_until("rich_s", &tools()), 0);
    let prose = "Sure, here it is.";
    assert_eq!(shown_until(prose, &tools()), prose.len());
}
