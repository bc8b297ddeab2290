//! A call of an MCP tool within a turn: replayed from the record when the turn ran it
//! before (a tool may act on the world, so a resumed turn never calls it twice), else
//! approved by the asker when the tool needs it (`approve`), called, and recorded before
//! the model sees the result. A failure is a tool error the model can act on:
//! `tool_failed` (the tool said so), `tool_unavailable` (its server is down or slow) or
//! `not_approved`.
//!
//! A crash between the call and its record is the one gap: that call runs again when the
//! turn resumes.

use serde_json::Value;

use super::approve::{self, Decision};
use super::runner::{Runner, Stop};
use crate::mcp::CallError;
use crate::tools::registry::Tool;
use crate::tools::{ToolError, ToolErrorCode};

impl Runner<'_> {
    /// Runs `tool` (`name` of MCP server number `server`) with `args`, as call `nth`.
    pub(super) async fn external(
        &self,
        tool: &Tool,
        (server, name): (usize, &str),
        args: &Value,
        nth: u32,
    ) -> Result<Value, Stop> {
        let recorded =
            self.store.tool_result(self.turn, nth).await.map_err(|e| Stop::Suspend(format!("store: {e}")))?;
        if let Some(content) = recorded {
            return Ok(Value::String(content));
        }
        if !matches!(args, Value::Object(_) | Value::Null) {
            return Err(Stop::Tool(ToolError::new(
                ToolErrorCode::InvalidArguments,
                "arguments must be one JSON object",
            )));
        }
        let call = self.kit.mcp.call(server, name, args.clone());
        let result = if tool.needs_approval {
            let asked = approve::ask(self, tool, args, nth).await?;
            if asked.decision != Decision::Allow {
                approve::close(self, &asked, nth).await;
                let refused = ToolError::new(ToolErrorCode::NotApproved, asked.refusal());
                return self.record(nth, Err(refused)).await;
            }
            let (result, ()) = tokio::join!(call, approve::close(self, &asked, nth));
            result
        } else {
            call.await
        };
        let content = match result {
            Ok(text) => Ok(text),
            Err(CallError::Failed(why)) => Err(ToolError::new(ToolErrorCode::ToolFailed, why)),
            Err(CallError::Unavailable(why)) => Err(ToolError::new(ToolErrorCode::ToolUnavailable, why)),
        };
        self.record(nth, content).await
    }

    /// Records call `nth`'s result as the model will see it, then hands it on.
    async fn record(&self, nth: u32, content: Result<String, ToolError>) -> Result<Value, Stop> {
        let text = match &content {
            Ok(text) => text.clone(),
            Err(e) => e.to_result(),
        };
        self.store
            .record_tool_result(self.turn, nth, &text)
            .await
            .map_err(|e| Stop::Suspend(format!("could not record a tool's result: {e}")))?;
        content.map(Value::String).map_err(Stop::Tool)
    }
}
