//! The tools: the registry of what a turn offers (`registry`: the rich tools and the MCP
//! servers' ones, with their approval and concurrency flags), what the model is told of
//! `rich_send` / `rich_edit` (`specs`), and the pure check every rich call goes through
//! before anything is sent (`plan`).
//!
//! `plan` turns the model's arguments into a [`RichCall`] or a [`ToolError`] with a stable
//! code, a one-line message and the JSON path, which the turn hands back to the model as
//! a tool result so it can fix its call. Nothing here does I/O: whether the caller may
//! edit a message or post in a room is decided later, by the turn, against the store.

pub mod args;
mod block_call;
mod plan;
mod poll;
pub mod registry;
mod specs;

use ruma::OwnedEventId;
use serde::Serialize;

use crate::blocks::Rich;

pub use block_call::{block_call, fill_fallback};
pub use plan::{MAX_FALLBACK, plan};
pub use poll::{ANSWERS as POLL_ANSWERS, PollCall, RICH_POLL, RICH_POLL_END, plan_poll, poll_specs};
pub use registry::{Offered, Toolbox};
pub use specs::{EXAMPLE_CALL, RoomChoices, prompt_line, tool_specs};

/// Tool names.
pub const RICH_SEND: &str = "rich_send";
pub const RICH_EDIT: &str = "rich_edit";
/// The schedule tools (their specs and checks are the schedules module's).
pub const SCHEDULE: &str = "schedule";
pub const SCHEDULES: &str = "schedules";
pub const UNSCHEDULE: &str = "unschedule";
pub const SCHEDULE_TOOLS: [&str; 3] = [SCHEDULE, SCHEDULES, UNSCHEDULE];

/// Where a call posts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoomTarget {
    /// The chat the turn is in (argument absent).
    Here,
    /// The asker's DM with this persona (`"dm"`).
    Dm,
    /// Another room, as the model named it (checked by the turn).
    Named(String),
}

/// A checked call, ready for the turn to authorize and send.
#[derive(Debug, Clone)]
pub enum RichCall {
    Send {
        payload: Rich,
        fallback: String,
        reply_to: Option<OwnedEventId>,
        thread: Option<OwnedEventId>,
        room: RoomTarget,
    },
    Edit {
        event_id: OwnedEventId,
        payload: Rich,
        fallback: String,
        room: RoomTarget,
    },
}

impl RichCall {
    /// The call as canonical JSON arguments (numbers canonicalized, absent keys left out):
    /// what `richbot blocks check --tool` prints.
    pub fn to_canonical_json(&self) -> serde_json::Value {
        let room = |r: &RoomTarget| match r {
            RoomTarget::Here => serde_json::Value::Null,
            RoomTarget::Dm => "dm".into(),
            RoomTarget::Named(n) => n.clone().into(),
        };
        let mut v = match self {
            RichCall::Send { payload, fallback, reply_to, thread, room: r } => serde_json::json!({
                "payload": payload.to_value(), "fallback": fallback, "reply_to": reply_to, "thread": thread, "room": room(r)
            }),
            RichCall::Edit { event_id, payload, fallback, room: r } => serde_json::json!({
                "event_id": event_id, "payload": payload.to_value(), "fallback": fallback, "room": room(r)
            }),
        };
        if let Some(map) = v.as_object_mut() {
            map.retain(|_, x| !x.is_null());
        }
        v
    }
}

/// Why a tool call was refused; sent back to the model as `{"error", "code", "path"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {error}")]
pub struct ToolError {
    pub error: String,
    pub code: ToolErrorCode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Stable error codes the model (and tests) can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorCode {
    /// The arguments are not what the schema says.
    InvalidArguments,
    /// The payload failed the block catalogue.
    InvalidPayload,
    /// No such tool.
    UnknownTool,
    /// The message would be too large for one Matrix event.
    TooLarge,
    /// `rich_edit` of a message this persona did not send.
    NotOwner,
    /// The `room` argument names a room the call may not post in.
    RoomNotAllowed,
    /// The homeserver refused the write for good (the reason says why); sending the same
    /// again will fail again.
    SendFailed,
    /// The homeserver could not be reached through the retries: a temporary failure, the
    /// same call may succeed later.
    HomeserverUnavailable,
    /// richbot itself failed (its database, a corrupt record); not the call's fault.
    Internal,
    /// A limit of the turn (tool calls per reply, writes per turn) was reached.
    LimitReached,
    /// The tool ran and reported a failure (an MCP `isError` result, or the server
    /// refused the call): the text says why.
    ToolFailed,
    /// The tool's server is down, broke off or did not answer in time; the same call may
    /// work later.
    ToolUnavailable,
    /// The person asking did not allow the call (they said no, or did not answer in time).
    NotApproved,
    /// The call was cut off while it ran (richbot stopped): it may or may not have acted,
    /// and it is not made again unasked.
    OutcomeUnknown,
    /// The model's reply reached its token limit while it wrote the call, or the model
    /// server could not read the call: never run.
    CutOff,
    /// The model made this same call (tool and arguments) before in this turn: not run again.
    Repeated,
    /// A payload's `mxc://` URL is neither the persona's upload nor media a member posted
    /// in a room the asker is in.
    MediaNotAllowed,
}

impl std::fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        f.write_str(&s)
    }
}

impl ToolError {
    pub fn new(code: ToolErrorCode, error: impl Into<String>) -> Self {
        Self { error: error.into(), code, path: None }
    }

    pub fn at(code: ToolErrorCode, path: impl Into<String>, error: impl Into<String>) -> Self {
        Self { error: error.into(), code, path: Some(path.into()) }
    }

    /// The JSON the model gets as the tool result.
    pub fn to_result(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| format!("{{\"error\":\"{}\"}}", self.code))
    }
}

/// `richbot blocks check`: `text` (a payload, or with `tool` a tool call's arguments)
/// checked, as pretty canonical JSON, or the error line.
pub fn check_text(text: &str, tool: Option<&str>) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let checked = match tool {
        Some(name) => plan(name, &value).map(|call| call.to_canonical_json()).map_err(|e| e.error)?,
        None => crate::blocks::Rich::checked(value).map(|r| r.to_value()).map_err(|e| e.to_string())?,
    };
    Ok(serde_json::to_string_pretty(&checked).unwrap_or_default())
}
