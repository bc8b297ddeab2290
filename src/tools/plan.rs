//! `plan(name, args)`: the pure check of a tool call's arguments, one rule at a time, each
//! failing with a [`ToolError`] the model can act on.

use ruma::{EventId, OwnedEventId};
use serde_json::{Map, Value};

use super::args;
use super::{RICH_EDIT, RICH_SEND, RichCall, RoomTarget, ToolError, ToolErrorCode};
use crate::blocks::{Rich, cut};

/// Most characters in a fallback.
pub const MAX_FALLBACK: usize = 20_000;

const SEND_ARGS: &[&str] = &["payload", "fallback", "reply_to", "thread", "room"];
const EDIT_ARGS: &[&str] = &["event_id", "payload", "fallback", "room"];

use ToolErrorCode::{InvalidArguments, InvalidPayload, UnknownTool};

/// Checks a tool call. `args` is the parsed arguments object (or null for none).
pub fn plan(name: &str, args: &Value) -> Result<RichCall, ToolError> {
    let allowed = match name {
        RICH_SEND => SEND_ARGS,
        RICH_EDIT => EDIT_ARGS,
        other => {
            return Err(ToolError::new(
                UnknownTool,
                format!("no tool `{}` (tools: {RICH_SEND}, {RICH_EDIT})", cut(other, 40)),
            ));
        }
    };
    let empty = Map::new();
    let args = match args {
        Value::Object(map) => map,
        Value::Null => &empty,
        _ => return Err(ToolError::new(InvalidArguments, "arguments must be a JSON object")),
    };
    if let Some(unknown) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ToolError::at(
            InvalidArguments,
            cut(unknown, 40),
            format!("unknown argument \"{}\" (allowed: {})", cut(unknown, 40), allowed.join(", ")),
        ));
    }
    let payload = payload(args.get("payload"))?;
    let fallback = fallback(args.get("fallback"), &payload)?;
    let room = room(args.get("room"))?;
    if name == RICH_SEND {
        Ok(RichCall::Send {
            payload,
            fallback,
            reply_to: optional_event_id(args, "reply_to")?,
            thread: optional_event_id(args, "thread")?,
            room,
        })
    } else {
        let event_id = optional_event_id(args, "event_id")?.ok_or_else(|| {
            ToolError::at(InvalidArguments, "event_id", "missing required argument \"event_id\" (the message to edit)")
        })?;
        Ok(RichCall::Edit { event_id, payload, fallback, room })
    }
}

fn payload(value: Option<&Value>) -> Result<Rich, ToolError> {
    let value = match value {
        None | Some(Value::Null) => {
            return Err(ToolError::at(
                InvalidArguments,
                "payload",
                "missing required argument \"payload\" ({\"v\": 1, \"blocks\": [...]})",
            ));
        }
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .map_err(|e| ToolError::at(InvalidPayload, "payload", format!("payload is a string but not JSON: {e}")))?,
        Some(v) => v.clone(),
    };
    if !value.is_object() {
        return Err(ToolError::at(
            InvalidPayload,
            "payload",
            "payload must be an object {\"v\": 1, \"blocks\": [...]}",
        ));
    }
    Rich::checked(value).map_err(|e| {
        let path = if e.path.is_empty() { "payload".to_owned() } else { format!("payload.{}", e.path) };
        ToolError::at(InvalidPayload, path, e.to_string())
    })
}

fn fallback(value: Option<&Value>, payload: &Rich) -> Result<String, ToolError> {
    let text = match value {
        Some(Value::String(s)) => s.trim().to_owned(),
        None | Some(Value::Null) => String::new(),
        Some(_) => return Err(ToolError::at(InvalidArguments, "fallback", "fallback must be a string (CommonMark)")),
    };
    let chars = text.chars().count();
    if chars > MAX_FALLBACK {
        return Err(ToolError::at(
            InvalidArguments,
            "fallback",
            format!("fallback is {chars} characters; at most {MAX_FALLBACK}"),
        ));
    }
    if text.is_empty() {
        let math = payload.find_math();
        if math.is_empty() {
            return Err(ToolError::at(
                InvalidArguments,
                "fallback",
                "missing required argument \"fallback\": the whole message as CommonMark text, for clients that cannot draw blocks",
            ));
        }
        return Ok(math.join("\n\n"));
    }
    Ok(text)
}

/// Most bytes in a `room` argument (the mxblocks-tools reference's cap).
const MAX_ROOM_BYTES: usize = 300;
/// Most bytes in an event id (the Matrix spec's cap on ids).
const MAX_EVENT_ID_BYTES: usize = 255;

/// `room`: trimmed; left out (or empty) is this chat; `dm`; else one line of at most 300
/// bytes, checked against the sandbox later.
fn room(value: Option<&Value>) -> Result<RoomTarget, ToolError> {
    let refuse = || {
        ToolError::at(
            InvalidArguments,
            "room",
            "room must be one line of at most 300 bytes without tabs: leave it out for this chat, \"dm\", or a room id",
        )
    };
    match value {
        None | Some(Value::Null) => Ok(RoomTarget::Here),
        Some(Value::String(s)) => match s.trim() {
            "dm" => Ok(RoomTarget::Dm),
            s if !s.is_empty() && s.len() <= MAX_ROOM_BYTES && !s.contains(['\n', '\r', '\t']) => {
                Ok(RoomTarget::Named(s.to_owned()))
            }
            _ => Err(refuse()),
        },
        Some(_) => Err(refuse()),
    }
}

fn optional_event_id(args: &Map<String, Value>, key: &str) -> Result<Option<OwnedEventId>, ToolError> {
    let bad = || {
        ToolError::at(
            InvalidArguments,
            key,
            format!("{key} must be an event id: \"$\" then non-space characters, at most {MAX_EVENT_ID_BYTES} bytes"),
        )
    };
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let s = s.trim();
            let s = if s.starts_with('$') { s } else { args::quoted_event_id(s).ok_or_else(bad)? };
            let rest = s.strip_prefix('$').ok_or_else(bad)?;
            if rest.is_empty() || s.len() > MAX_EVENT_ID_BYTES || rest.contains(char::is_whitespace) {
                return Err(bad());
            }
            EventId::parse(s).map(Some).map_err(|_| bad())
        }
        Some(_) => Err(bad()),
    }
}
