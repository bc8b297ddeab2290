//! `plan`: one case per rule, the tool specs, and the worked example.

use richbot::tools::{EXAMPLE_CALL, RichCall, RoomTarget, ToolErrorCode, plan, tool_specs};
use serde_json::{Value, json};

fn payload() -> Value {
    json!({"v": 1, "blocks": [{"type": "details", "summary": "s", "body": "b"}]})
}

fn err(name: &str, args: Value) -> (ToolErrorCode, Option<String>, String) {
    let e = plan(name, &args).expect_err("should be refused");
    (e.code, e.path, e.error)
}

#[test]
fn refusals_one_per_rule() {
    use ToolErrorCode::*;
    let p = payload();
    let long = "x".repeat(41);
    let cases: Vec<(&str, Value, ToolErrorCode, Option<&str>, &str)> = vec![
        ("rich_post", json!({}), UnknownTool, None, "no tool `rich_post`"),
        ("rich_send", json!([1]), InvalidArguments, None, "arguments must be a JSON object"),
        ("rich_send", Value::Null, InvalidArguments, Some("payload"), "missing required argument \"payload\""),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "colour": 1}),
            InvalidArguments,
            Some("colour"),
            "unknown argument \"colour\"",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", long.clone(): 1}),
            InvalidArguments,
            Some("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…"),
            "unknown argument \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…\"",
        ),
        (
            "rich_send",
            json!({"payload": "{oops", "fallback": "f"}),
            InvalidPayload,
            Some("payload"),
            "payload is a string but not JSON",
        ),
        (
            "rich_send",
            json!({"payload": 5, "fallback": "f"}),
            InvalidPayload,
            Some("payload"),
            "payload must be an object",
        ),
        (
            "rich_send",
            json!({"payload": {"v": 1, "blocks": [{"type": "weather", "location": "L"}]}, "fallback": "f"}),
            InvalidPayload,
            Some("payload.blocks[0]"),
            "blocks[0] (weather): missing required field \"temp\"",
        ),
        (
            "rich_send",
            json!({"payload": p}),
            InvalidArguments,
            Some("fallback"),
            "missing required argument \"fallback\"",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "   "}),
            InvalidArguments,
            Some("fallback"),
            "missing required argument \"fallback\"",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": 3}),
            InvalidArguments,
            Some("fallback"),
            "fallback must be a string",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "x".repeat(20_001)}),
            InvalidArguments,
            Some("fallback"),
            "at most 20000",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "reply_to": "abc"}),
            InvalidArguments,
            Some("reply_to"),
            "must be an event id",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "thread": "$"}),
            InvalidArguments,
            Some("thread"),
            "must be an event id",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "thread": format!("${}", "a".repeat(255))}),
            InvalidArguments,
            Some("thread"),
            "must be an event id",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "reply_to": "$a b"}),
            InvalidArguments,
            Some("reply_to"),
            "must be an event id",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "room": ""}),
            InvalidArguments,
            Some("room"),
            "one line of at most 300 bytes",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "room": "a\nb"}),
            InvalidArguments,
            Some("room"),
            "one line of at most 300 bytes",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "room": "!a\tb"}),
            InvalidArguments,
            Some("room"),
            "without tabs",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "room": "é".repeat(151)}),
            InvalidArguments,
            Some("room"),
            "one line of at most 300 bytes",
        ),
        (
            "rich_send",
            json!({"payload": p, "fallback": "f", "room": "r".repeat(301)}),
            InvalidArguments,
            Some("room"),
            "one line of at most 300 bytes",
        ),
        (
            "rich_edit",
            json!({"payload": p, "fallback": "f"}),
            InvalidArguments,
            Some("event_id"),
            "missing required argument \"event_id\"",
        ),
        (
            "rich_edit",
            json!({"event_id": "$e", "payload": p, "fallback": "f", "reply_to": "$x"}),
            InvalidArguments,
            Some("reply_to"),
            "unknown argument \"reply_to\"",
        ),
    ];
    for (name, args, code, path, message) in cases {
        let (c, p, m) = err(name, args.clone());
        assert_eq!(c, code, "{name} {args}: {m}");
        assert_eq!(p.as_deref(), path, "{name} {args}: {m}");
        assert!(m.contains(message), "{name}: {m:?} should contain {message:?}");
    }
}

#[test]
fn accepted_calls() {
    let p = payload();
    let call = plan("rich_send", &json!({"payload": p.to_string(), "fallback": "  text  ", "reply_to": " $r\n", "thread": format!("${}", "a".repeat(254)), "room": "  dm "})).expect("valid");
    let RichCall::Send { fallback, reply_to, thread, room, payload } = call else { panic!("a send") };
    assert_eq!(fallback, "text");
    assert_eq!(reply_to.expect("reply").as_str(), "$r");
    assert!(thread.is_some());
    assert_eq!(room, RoomTarget::Dm);
    assert_eq!(payload.to_value(), p);

    let math = json!({"payload": {"v": 1, "blocks": [{"type": "math", "tex": "e^{i\\pi}+1=0"}]}});
    let RichCall::Send { fallback, room, .. } = plan("rich_send", &math).expect("math needs no fallback") else {
        panic!()
    };
    assert_eq!(fallback, "e^{i\\pi}+1=0");
    assert_eq!(room, RoomTarget::Here);

    // The note's words copied around the id: the id.
    let copied = json!({"payload": p, "fallback": "f", "reply_to": "members' $q1 (\"What's the weather…\")"});
    let RichCall::Send { reply_to, .. } = plan("rich_send", &copied).expect("the id in the note's words") else {
        panic!("a send")
    };
    assert_eq!(reply_to.expect("reply").as_str(), "$q1");

    let edit = plan("rich_edit", &json!({"event_id": "\t$orig ", "payload": p, "fallback": "f", "room": " !abc"}))
        .expect("valid edit");
    assert!(
        matches!(edit, RichCall::Edit { ref event_id, room: RoomTarget::Named(ref r), .. } if event_id.as_str() == "$orig" && r == "!abc")
    );
}

#[test]
fn the_worked_example_in_the_description_is_a_valid_call() {
    let specs = tool_specs(2500);
    let send = specs.iter().find(|s| s.name == "rich_send").expect("rich_send");
    assert!(send.description.contains(EXAMPLE_CALL));
    let args: Value = serde_json::from_str(EXAMPLE_CALL).expect("example is JSON");
    assert!(plan("rich_send", &args).is_ok());
    for block in richbot::blocks::CATALOGUE {
        assert!(send.description.contains(&format!("{}(", block.name)), "{} listed", block.name);
    }
}

#[test]
fn schemas_are_closed_and_the_same_in_every_room() {
    // Which rooms `room` may name is the turn's note's (`turn::context`): the specs are the
    // same bytes everywhere, so a model server reuses them from its cache.
    for spec in tool_specs(2500) {
        assert_eq!(spec.parameters["additionalProperties"], false, "{}", spec.name);
    }
    let send = tool_specs(2500).into_iter().find(|s| s.name == "rich_send").expect("rich_send");
    let room = &send.parameters["properties"]["room"];
    assert!(room["description"].as_str().expect("d").contains("a room id from the note"));
    assert!(room.get("enum").is_none(), "{room}");
    // An edit is made where its message is: the schema offers no room (`plan` still takes
    // one and checks it against the message's).
    let edit = tool_specs(2500).into_iter().find(|s| s.name == "rich_edit").expect("rich_edit");
    assert!(edit.parameters["properties"].get("room").is_none());
    assert_eq!(edit.parameters["required"], json!(["event_id", "payload", "fallback"]));
    let prompt = richbot::tools::prompt_line();
    assert!(prompt.contains("rich_send") && prompt.contains("never write a call as text"));
    // When to end with [no reply] is rich_send's to say: it matters after a rich message.
    assert!(send.description.contains("end your turn with exactly [no reply]"), "{}", send.description);
}

#[test]
fn tool_errors_serialize_for_the_model() {
    let e = plan("rich_send", &json!({"payload": payload(), "fallback": "f", "zzz": 1})).expect_err("refused");
    let v: Value = serde_json::from_str(&e.to_result()).expect("json");
    assert_eq!(
        v,
        json!({"error": "unknown argument \"zzz\" (allowed: payload, fallback, reply_to, thread, room)", "code": "invalid_arguments", "path": "zzz"})
    );
}
