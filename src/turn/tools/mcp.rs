//! A call of an MCP tool within a turn: replayed from the record when the turn ran it
//! before (a tool may act on the world, so a resumed turn never calls it twice), else
//! approved by the asker when the tool needs it (`approve`), called, and recorded before
//! the model sees the result. A failure is a tool error the model can act on:
//! `tool_failed` (the tool said so), `tool_unavailable` (its server is down or slow) or
//! `not_approved`.
//!
//! A tool's images are uploaded as the persona before the result is recorded, and the
//! model reads their `mxc://` URLs in it (`uploads`).
//!
//! At most once: the call is recorded as started before it is made, and an approved
//! call spends its approval then. A call found started with no result was cut off (a
//! crash, a kill) and may or may not have acted: a gated one is asked for again (a new
//! notice; the old decision is spent), an ungated one goes back to the model as
//! `outcome_unknown`, never made again unasked.

use serde_json::Value;

use super::approval_notice::{self, Decision};
use crate::mcp::CallError;
use crate::tools::registry::Tool;
use crate::tools::{ToolError, ToolErrorCode};
use crate::turn::reach::Reach;
use crate::turn::stop::Stop;

/// Runs `tool` (`name` of MCP server number `server`) with `args`, as call `nth`.
pub(in crate::turn) async fn call(
    r: &Reach<'_>,
    tool: &Tool,
    server: usize,
    name: &str,
    args: &Value,
    nth: u32,
) -> Result<Value, Stop> {
    let recorded = r.store.tool_result(r.turn, nth).await.map_err(|e| Stop::Suspend(format!("store: {e}")))?;
    if let Some(content) = recorded {
        return Ok(Value::String(content));
    }
    if !matches!(args, Value::Object(_) | Value::Null) {
        return Err(Stop::Tool(ToolError::new(ToolErrorCode::InvalidArguments, "arguments must be one JSON object")));
    }
    let store_stop = |e: crate::store::Error| Stop::Suspend(format!("store: {e}"));
    let started = r.store.tool_started(r.turn, nth).await.map_err(store_stop)?;
    if started && !tool.needs_approval {
        tracing::warn!(turn = r.turn, tool = %tool.spec.name, "a tool call was cut off while it ran; its outcome is unknown");
        let unknown = ToolError::new(
            ToolErrorCode::OutcomeUnknown,
            format!(
                "{} was cut off while it ran (richbot restarted): it may or may not have taken effect. \
                 Check before calling it again, or tell the person",
                tool.spec.name
            ),
        );
        return record(r, nth, Err(unknown)).await;
    }
    let call = r.kit.mcp.call(server, name, args.clone());
    // Fenced: an instance that lost the room's lease makes no call (it would run twice).
    let fence = || async { r.outbox.holds(r.turn).await.map_err(crate::turn::stop::outbox_error) };
    let result = if tool.needs_approval {
        let asked = approval_notice::ask(r, tool, args, nth).await?;
        let spent = match asked.approval {
            Some(id) if asked.decision == Decision::Allow => {
                r.store.use_approval(id, crate::clock::now_ms()).await.map_err(store_stop)?
            }
            _ => false,
        };
        if !spent {
            approval_notice::close(r, &asked, nth).await;
            let refused = ToolError::new(ToolErrorCode::NotApproved, asked.refusal());
            return record(r, nth, Err(refused)).await;
        }
        fence().await?;
        r.store.start_tool(r.turn, nth, crate::clock::now_ms()).await.map_err(store_stop)?;
        let (result, ()) = tokio::join!(call, approval_notice::close(r, &asked, nth));
        result
    } else {
        fence().await?;
        r.store.start_tool(r.turn, nth, crate::clock::now_ms()).await.map_err(store_stop)?;
        call.await
    };
    let content = match result {
        Ok(out) if out.images.is_empty() => Ok(out.text),
        Ok(out) => {
            // Uploaded before the result is recorded: a turn cut off here finds the
            // call started, never makes it again, and so never uploads again either.
            let lines = crate::turn::media::uploads::upload_images(r, &out.images, nth).await?;
            Ok(format!("{}\n{lines}", out.text))
        }
        Err(CallError::Failed(why)) => Err(ToolError::new(ToolErrorCode::ToolFailed, why)),
        Err(CallError::Unavailable(why)) => Err(ToolError::new(ToolErrorCode::ToolUnavailable, why)),
    };
    record(r, nth, content).await
}

/// Records call `nth`'s result as the model will see it, then hands it on.
async fn record(r: &Reach<'_>, nth: u32, content: Result<String, ToolError>) -> Result<Value, Stop> {
    let text = match &content {
        Ok(text) => text.clone(),
        Err(e) => e.to_result(),
    };
    r.store
        .record_tool_result(r.turn, nth, &text)
        .await
        .map_err(|e| Stop::Suspend(format!("could not record a tool's result: {e}")))?;
    content.map(Value::String).map_err(Stop::Tool)
}
