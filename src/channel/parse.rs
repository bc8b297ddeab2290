//! A call's arguments, read into a request: the host-channel shape (`{channel, kind, to,
//! body}`, plus `payload` / `fallback` over HTTP), `/v1/edit`'s, and the rich tools',
//! which go through the same `plan()` as the model's calls. Every refusal names the
//! argument at fault.

use ruma::{EventId, OwnedEventId};
use serde_json::{Map, Value};

use super::{Content, EditRequest, Failure, SendRequest};
use crate::tools::{MAX_FALLBACK, RICH_EDIT, RICH_SEND, RichCall, RoomTarget, plan};

/// A request and its idempotency key.
pub type Keyed<T> = (T, Option<String>);

/// Where a host-channel call goes: `channel` (`matrix`, or unset), `kind` (`direct`: `to`
/// is a user; `channel`: a room) and `to`.
pub(super) fn destination(args: &Map<String, Value>) -> Result<(bool, String), Failure> {
    match args.get("channel") {
        None | Some(Value::Null) => {}
        Some(Value::String(c)) if c == "matrix" => {}
        Some(_) => {
            return Err(Failure::invalid("channel", "channel must be \"matrix\" (richbot delivers only to Matrix)"));
        }
    }
    let direct = match args.get("kind").and_then(Value::as_str) {
        Some("direct") => true,
        Some("channel") => false,
        _ => return Err(Failure::invalid("kind", "kind must be \"direct\" (to a user) or \"channel\" (to a room)")),
    };
    let to = string(args, "to")?.ok_or_else(|| {
        Failure::invalid("to", "missing \"to\": a room id or alias for a channel, a user id for a direct message")
    })?;
    Ok((direct, to))
}

/// `send` (MCP: text only) or `/v1/send` (`rich`: a payload too).
pub fn send(args: &Value, rich: bool) -> Result<Keyed<SendRequest>, Failure> {
    let allowed: &[&str] = if rich {
        &["channel", "kind", "to", "body", "payload", "fallback", "reply_to", "thread", "idempotency_key"]
    } else {
        &["channel", "kind", "to", "body", "idempotency_key"]
    };
    let args = object(args, allowed)?;
    let (direct, to) = destination(args)?;
    let key = string(args, "idempotency_key")?;
    let (content, reply_to, thread) = match args.get("payload") {
        Some(payload) if !payload.is_null() => {
            let mut call = Map::new();
            call.insert("payload".into(), payload.clone());
            for (from, to) in
                [("fallback", "fallback"), ("body", "fallback"), ("reply_to", "reply_to"), ("thread", "thread")]
            {
                if let Some(v) = args.get(from).filter(|v| !v.is_null() && !call.contains_key(to)) {
                    call.insert(to.into(), v.clone());
                }
            }
            match plan(RICH_SEND, &Value::Object(call))? {
                RichCall::Send { payload, fallback, reply_to, thread, .. } => {
                    (Content::Rich { payload, fallback }, reply_to, thread)
                }
                RichCall::Edit { .. } => unreachable!("plan(rich_send) makes a send"),
            }
        }
        _ => (Content::Text(body(args, "body")?), event_id(args, "reply_to")?, event_id(args, "thread")?),
    };
    Ok((SendRequest { direct, to, content, reply_to, thread }, key))
}

/// `/v1/edit`: `{message_id, payload?, fallback? | body?}`.
pub fn edit(args: &Value) -> Result<Keyed<EditRequest>, Failure> {
    let args = object(args, &["message_id", "payload", "fallback", "body", "idempotency_key"])?;
    let message_id = event_id(args, "message_id")?
        .ok_or_else(|| Failure::invalid("message_id", "missing \"message_id\": the message_id a send returned"))?;
    let key = string(args, "idempotency_key")?;
    let content = match args.get("payload").filter(|p| !p.is_null()) {
        Some(payload) => {
            let fallback = args.get("fallback").filter(|v| !v.is_null()).or_else(|| args.get("body")).cloned();
            let call = serde_json::json!({"event_id": message_id, "payload": payload, "fallback": fallback});
            rich_content(plan(RICH_EDIT, &call)?)
        }
        None => Content::Text(body(args, if args.contains_key("fallback") { "fallback" } else { "body" })?),
    };
    Ok((EditRequest { message_id, content }, key))
}

/// The MCP `rich_send`: the model's arguments, where `room` is a room id, an alias or
/// `@user:server` (a direct message), and required.
pub fn rich_send(args: &Value) -> Result<Keyed<SendRequest>, Failure> {
    let (args, key) = without_key(args)?;
    match plan(RICH_SEND, &args)? {
        RichCall::Send { payload, fallback, reply_to, thread, room } => {
            let to = match room {
                RoomTarget::Named(to) => to,
                _ => {
                    return Err(Failure::invalid(
                        "room",
                        "room must be a room id (!...), an alias (#...) or @user:server for a direct message",
                    ));
                }
            };
            let direct = to.starts_with('@');
            Ok((SendRequest { direct, to, content: Content::Rich { payload, fallback }, reply_to, thread }, key))
        }
        RichCall::Edit { .. } => unreachable!("plan(rich_send) makes a send"),
    }
}

/// The MCP `rich_edit`: the model's arguments (`room` is not needed: the message's).
pub fn rich_edit(args: &Value) -> Result<Keyed<EditRequest>, Failure> {
    let (mut args, key) = without_key(args)?;
    if let Some(map) = args.as_object_mut() {
        map.remove("room");
    }
    let call = plan(RICH_EDIT, &args)?;
    let RichCall::Edit { event_id, .. } = &call else { unreachable!("plan(rich_edit) makes an edit") };
    let message_id = event_id.clone();
    Ok((EditRequest { message_id, content: rich_content(call) }, key))
}

fn rich_content(call: RichCall) -> Content {
    match call {
        RichCall::Send { payload, fallback, .. } | RichCall::Edit { payload, fallback, .. } => {
            Content::Rich { payload, fallback }
        }
    }
}

/// The arguments without `idempotency_key`, and the key.
fn without_key(args: &Value) -> Result<(Value, Option<String>), Failure> {
    let mut args = args.clone();
    let key = match args.as_object_mut().and_then(|m| m.remove("idempotency_key")) {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) => Some(k),
        Some(_) => return Err(Failure::invalid("idempotency_key", "idempotency_key must be a string")),
    };
    Ok((args, key))
}

pub(super) fn object<'a>(args: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>, Failure> {
    let args = args.as_object().ok_or_else(|| Failure::invalid("", "the request must be a JSON object"))?;
    if let Some(unknown) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        let shown = crate::blocks::cut(unknown, 40);
        return Err(Failure::invalid(&shown, format!("unknown field \"{shown}\" (fields: {})", allowed.join(", "))));
    }
    Ok(args)
}

pub(super) fn string(args: &Map<String, Value>, key: &str) -> Result<Option<String>, Failure> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Failure::invalid(key, format!("{key} must be a string"))),
    }
}

/// A required CommonMark text of at most [`MAX_FALLBACK`] characters.
fn body(args: &Map<String, Value>, key: &str) -> Result<String, Failure> {
    let text = string(args, key)?.map(|s| s.trim().to_owned()).unwrap_or_default();
    if text.is_empty() {
        return Err(Failure::invalid(
            key,
            format!("missing \"{key}\": the message as CommonMark text (or a payload with its fallback)"),
        ));
    }
    let chars = text.chars().count();
    if chars > MAX_FALLBACK {
        return Err(Failure::invalid(key, format!("{key} is {chars} characters; at most {MAX_FALLBACK}")));
    }
    Ok(text)
}

fn event_id(args: &Map<String, Value>, key: &str) -> Result<Option<OwnedEventId>, Failure> {
    match string(args, key)? {
        None => Ok(None),
        Some(s) => EventId::parse(s.trim())
            .map(Some)
            .map_err(|_| Failure::invalid(key, format!("{key} must be an event id (\"$...\")"))),
    }
}

/// The schedule an `unschedule` call names (`id`, a number or a number in a string).
pub(super) fn schedule_id(args: &Value) -> Result<i64, Failure> {
    args.get("id")
        .and_then(crate::tools::args::integer)
        .filter(|id| *id > 0)
        .ok_or_else(|| Failure::invalid("id", "id must be a schedule's id (a number)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(result: Result<impl std::fmt::Debug, Failure>) -> (String, String) {
        let f = result.expect_err("refused");
        (f.code.to_owned(), f.path.unwrap_or_default())
    }

    #[test]
    fn each_refusal_names_the_argument_at_fault() {
        let weather = json!({"v": 1, "blocks": [{"type": "weather", "location": "Oslo"}]});
        for (args, path) in [
            (json!({"kind": "channel", "to": "!r:x", "body": "hi", "colour": "red"}), "colour"),
            (json!({"channel": "slack", "kind": "channel", "to": "!r:x", "body": "hi"}), "channel"),
            (json!({"kind": "group", "to": "!r:x", "body": "hi"}), "kind"),
            (json!({"kind": "channel", "body": "hi"}), "to"),
            (json!({"kind": "channel", "to": "!r:x", "body": "  "}), "body"),
            (json!({"kind": "channel", "to": "!r:x", "body": "hi", "reply_to": "nope"}), "reply_to"),
            (json!({"kind": "channel", "to": "!r:x", "payload": weather, "fallback": "Oslo"}), "payload.blocks[0]"),
        ] {
            let (code, at) = refused(send(&args, true));
            assert_eq!(code, "invalid_arguments", "{args}");
            assert!(at.starts_with(path), "{args}: {at}");
        }
        let text_only = json!({"kind": "channel", "to": "!r:x", "body": "hi", "payload": {}});
        assert_eq!(refused(send(&text_only, false)).1, "payload", "the MCP send is text only");
        assert_eq!(
            refused(rich_send(&json!({"payload": {"v": 1, "blocks": []}, "fallback": "x"}))).1,
            "payload.blocks"
        );
        let here = json!({"payload": {"v": 1, "blocks": [{"type": "code", "code": "x"}]}, "fallback": "x"});
        assert_eq!(refused(rich_send(&here)).1, "room", "an agent has no chat of its own");
        assert_eq!(refused(edit(&json!({"body": "x"}))).1, "message_id");
        assert_eq!(refused(schedule_id(&json!({"id": "four"}))).1, "id");
    }

    #[test]
    fn a_schedules_id_may_come_quoted_as_models_write_it() {
        for id in [json!(4), json!("4"), json!(" 4 "), json!(4.0)] {
            assert_eq!(schedule_id(&json!({ "id": id })).expect("read"), 4, "{id}");
        }
    }

    #[test]
    fn a_send_reads_its_target_content_and_key() {
        let args =
            json!({"channel": "matrix", "kind": "direct", "to": "@alice:x", "body": " hi ", "idempotency_key": "k"});
        let (req, key) = send(&args, false).expect("valid");
        assert!(req.direct && req.to == "@alice:x" && key.as_deref() == Some("k"));
        assert!(matches!(req.content, Content::Text(ref t) if t == "hi"));
        let rich = json!({"room": "@bob:x", "payload": {"v": 1, "blocks": [{"type": "code", "code": "x"}]}, "fallback": "x", "idempotency_key": "k2"});
        let (req, key) = rich_send(&rich).expect("valid");
        assert!(req.direct && key.as_deref() == Some("k2") && matches!(req.content, Content::Rich { .. }));
        let body_as_fallback = json!({"kind": "channel", "to": "#ops:x", "body": "x", "payload": {"v": 1, "blocks": [{"type": "code", "code": "x"}]}});
        let (req, _) = send(&body_as_fallback, true).expect("body stands for the fallback");
        assert!(!req.direct && matches!(req.content, Content::Rich { ref fallback, .. } if fallback == "x"));
    }
}
