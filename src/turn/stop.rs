//! How a tool call of a turn ends when it does not complete: a tool error the model can
//! act on, or a suspension of the turn (resumed from its record later); and how the
//! outbox's and the renderer's failures map onto those; and a call's arguments, refused
//! before anything runs when they were cut off, unreadable to the server, or not JSON.

use serde_json::Value;

use super::tools::targets::internal;
use crate::agent::ToolCall;
use crate::outbox;
use crate::render;
use crate::tools::{ToolError, ToolErrorCode};

/// Why a call did not complete: the model's to fix (a tool error), or not now (suspend).
pub(super) enum Stop {
    Tool(ToolError),
    Suspend(String),
}

impl From<ToolError> for Stop {
    fn from(e: ToolError) -> Self {
        Stop::Tool(e)
    }
}

pub(super) fn render_error(e: render::Error) -> ToolError {
    match e {
        render::Error::TooLarge(_) => ToolError::new(ToolErrorCode::TooLarge, e.to_string()),
        render::Error::Numbers(b) => ToolError::at(ToolErrorCode::InvalidPayload, b.path.clone(), b.to_string()),
    }
}

/// A write that did not land: refused for good goes back to the model; unreachable (or a
/// database failure) suspends the turn, to be resumed from its record.
pub(super) fn outbox_error(e: outbox::Error) -> Stop {
    match e {
        outbox::Error::NotOwner => Stop::Tool(ToolError::at(
            ToolErrorCode::NotOwner,
            "event_id",
            "not a message you sent; you can only edit your own messages",
        )),
        outbox::Error::Refused(reason) => Stop::Tool(ToolError::new(
            ToolErrorCode::SendFailed,
            format!("the homeserver refused the message: {reason}"),
        )),
        outbox::Error::Unencrypted(_) => Stop::Tool(ToolError::new(ToolErrorCode::SendFailed, e.to_string())),
        outbox::Error::Mismatch(_) => Stop::Tool(internal(e)),
        outbox::Error::Unavailable(reason) => Stop::Suspend(format!("the homeserver is unavailable: {reason}")),
        outbox::Error::Store(e) => Stop::Suspend(format!("store: {e}")),
    }
}

/// The call's arguments as JSON (`null` when empty); a cut call is refused even if it parses.
pub(super) fn arguments(call: &ToolCall) -> Result<Value, ToolError> {
    if call.cut && call.name == crate::agent::UNREADABLE_CALL {
        return Err(ToolError::new(ToolErrorCode::CutOff, crate::strings::UNREADABLE));
    }
    if call.cut {
        return Err(ToolError::new(ToolErrorCode::CutOff, crate::strings::CUT_OFF));
    }
    if call.arguments.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&call.arguments).map_err(|e| {
        ToolError::new(
            ToolErrorCode::InvalidArguments,
            format!("arguments are not valid JSON ({e}); send one JSON object"),
        )
    })
}
