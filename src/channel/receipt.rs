//! What a caller gets back: a receipt, or a failure object that says what to change. A
//! failure is never a receipt with an empty id; over HTTP it has its status (and for 429
//! a `Retry-After`), over MCP it is the same object as an `isError` result.

use serde::Serialize;
use serde_json::Value;

use crate::tools::{ToolError, ToolErrorCode};

/// Where a message landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Receipt {
    /// The message (for an edit, the message edited: the id to edit or read replies by).
    pub message_id: String,
    pub room_id: String,
    /// The event this call wrote (for a send, the message itself; for an edit, the edit).
    pub event_id: String,
    /// An earlier call with the same idempotency key made it; nothing was posted now.
    pub deduplicated: bool,
}

/// A call that did not post: `{"error", "code", "path", "details"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub error: String,
    pub code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
    #[serde(skip)]
    pub status: u16,
    /// Seconds to wait before trying again (429).
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

impl Failure {
    pub fn new(status: u16, code: &'static str, error: impl Into<String>) -> Self {
        Self { error: error.into(), code, path: None, details: Vec::new(), status, retry_after: None }
    }

    pub fn at(self, path: impl Into<String>) -> Self {
        Self { path: Some(path.into()), ..self }
    }

    pub fn invalid(path: &str, error: impl Into<String>) -> Self {
        Self::new(400, "invalid_arguments", error).at(path)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "unauthorized", "send the token of an [[agents.clients]] entry as Authorization: Bearer <token>")
    }

    pub fn unavailable(e: impl std::fmt::Display) -> Self {
        Self::new(503, "homeserver_unavailable", format!("the homeserver could not be reached ({e}); try again later"))
    }

    /// An error inside richbot: logged in full, told without internals.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "an agent client's call failed inside richbot");
        Self::new(500, "internal", "richbot could not complete the call because of an internal error; try again later")
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A refused tool call, as the model would get it, for a caller: a block error keeps
/// its JSON path, and its code stays in `details`.
impl From<ToolError> for Failure {
    fn from(e: ToolError) -> Self {
        let details = vec![serde_json::json!({"code": e.code.to_string(), "path": e.path})];
        let (status, code) = match e.code {
            ToolErrorCode::InvalidArguments | ToolErrorCode::InvalidPayload | ToolErrorCode::TooLarge => {
                (400, "invalid_arguments")
            }
            ToolErrorCode::UnknownTool => (400, "unknown_tool"),
            _ => return Failure::internal(e),
        };
        Self { error: e.error, code, path: e.path, details, status, retry_after: None }
    }
}
