//! Runs the model's tool calls for one turn: parse the arguments, send each call to its
//! feature (`tools`: a rich message, a poll, a schedule, an MCP tool, each a function of
//! the turn's [`Reach`]), show a slow call on the live answer, and settle the result.
//! Every failure becomes a tool result `{"error", "code", "path"}` the model can act on,
//! with a code that says whose fault it is: the call's, a limit's, the homeserver's (for
//! good, or for now), or richbot's; a write that cannot be made now suspends the turn.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use super::live::Live;
use super::reach::Reach;
use super::stop::{Stop, arguments};
use super::tools::{mcp, polls, rich, schedules};
use crate::agent::{Suspend, ToolCall, ToolRunner};
use crate::metrics::Metrics;
use crate::outbox::WriteId;
use crate::tools::registry::Kind;
use crate::tools::{RICH_POLL, RICH_POLL_END, RICH_SEND, SCHEDULE_TOOLS, ToolError, ToolErrorCode};

/// One turn's tool runner: the calls' [`Reach`], and what only the runner keeps (the
/// live answer it shows slow calls on, and whether a call posted).
pub struct Runner<'a> {
    reach: Reach<'a>,
    live: &'a Live<'a>,
    /// Whether a call of the turn posted or edited a message (it came back with its id).
    posted: AtomicBool,
}

impl<'a> Runner<'a> {
    pub fn new(reach: Reach<'a>, live: &'a Live<'a>) -> Self {
        Self { reach, live, posted: AtomicBool::new(false) }
    }

    /// Whether the turn's tools posted or edited anything.
    pub fn wrote(&self) -> bool {
        self.posted.load(Ordering::Relaxed)
    }

    /// The id the turn's next write (its final answer) takes.
    pub fn next_write(&self) -> WriteId {
        self.reach.next_write()
    }
}

/// A tool call that runs longer than this is shown on the reply's message.
const SLOW_TOOL: std::time::Duration = std::time::Duration::from_secs(2);

impl ToolRunner for Runner<'_> {
    async fn run(&self, call: &ToolCall, nth: u32) -> Result<String, Suspend> {
        let live = self.live;
        let tool = self.reach.kit.offered.get(&call.name);
        if tool.is_some_and(|t| t.needs_approval) {
            // Its wait for the asker is not slowness: the approval notice says what waits.
            return self.settle(call, self.dispatch(call, nth).await);
        }
        let result = {
            let work = self.dispatch(call, nth);
            tokio::pin!(work);
            tokio::select! {
                r = &mut work => r,
                () = tokio::time::sleep(SLOW_TOOL) => {
                    let (r, note) = tokio::join!(&mut work, live.tool_running(&call.name));
                    if let Some(note) = note {
                        live.tool_done(note).await;
                    }
                    r
                }
            }
        };
        self.settle(call, result)
    }

    fn concurrent(&self, name: &str) -> bool {
        self.reach.kit.offered.get(name).is_some_and(|t| t.concurrent)
    }

    fn skipped(&self, call: &ToolCall, limit: usize) -> String {
        let e = ToolError::new(
            ToolErrorCode::LimitReached,
            format!("at most {limit} tool calls are run per reply; this one was not. Make fewer calls."),
        );
        self.refused(call, &e)
    }

    fn repeated(&self, call: &ToolCall) -> String {
        self.refused(call, &ToolError::new(ToolErrorCode::Repeated, crate::strings::REPEATED))
    }
}

impl Runner<'_> {
    fn refused(&self, call: &ToolCall, e: &ToolError) -> String {
        tracing::info!(tool = %call.name, code = %e.code, error = %e.error, "tool call refused");
        self.reach.kit.metrics.tool_call(&call.name, &e.code.to_string());
        e.to_result()
    }

    /// The tool result for the model, or the suspension of the turn.
    fn settle(&self, call: &ToolCall, result: Result<Value, Stop>) -> Result<String, Suspend> {
        match result {
            Ok(v) => {
                self.reach.kit.metrics.tool_call(&call.name, "ok");
                if v.get("event_id").is_some() {
                    self.posted.store(true, Ordering::Relaxed);
                }
                if let Some(waited) = v.get("waited_ms").and_then(Value::as_u64) {
                    Metrics::add(&self.reach.kit.metrics.edit_wait_ms, waited);
                }
                // A tool's own text goes back as it is; richbot's results are JSON.
                Ok(match v {
                    Value::String(text) => text,
                    v => v.to_string(),
                })
            }
            Err(Stop::Tool(e)) => Ok(self.refused(call, &e)),
            Err(Stop::Suspend(why)) => {
                tracing::warn!(tool = %call.name, why, "the call cannot be made now; the turn will resume");
                Err(Suspend(why))
            }
        }
    }

    /// Sends the call where its tool lives; a name this turn did not offer is unknown,
    /// unless it is a block's (`tools::block_call`): then it is that block's rich message.
    async fn dispatch(&self, call: &ToolCall, nth: u32) -> Result<Value, Stop> {
        let args = arguments(call)?;
        // A rich message without its fallback: the blocks' own plain rendering.
        let args = match call.name == RICH_SEND {
            true => crate::tools::fill_fallback(&args).unwrap_or(args),
            false => args,
        };
        let sends = self.reach.kit.offered.get(&call.name).is_none() && self.reach.kit.offered.get(RICH_SEND).is_some();
        if let Some(rich) = sends.then(|| crate::tools::block_call(&call.name, &args)).flatten() {
            let send = ToolCall { name: RICH_SEND.to_owned(), ..call.clone() };
            return rich::call(&self.reach, &send, &rich, nth).await;
        }
        match self.reach.kit.offered.get(&call.name).map(|t| (t, &t.kind)) {
            Some((tool, Kind::Mcp { server, tool: name })) => {
                mcp::call(&self.reach, tool, *server, name, &args, nth).await
            }
            _ if [RICH_POLL, RICH_POLL_END].contains(&call.name.as_str()) => {
                polls::call(&self.reach, &call.name, &args).await
            }
            _ if SCHEDULE_TOOLS.contains(&call.name.as_str()) => schedules::call(&self.reach, call, &args).await,
            _ => rich::call(&self.reach, call, &args, nth).await,
        }
    }
}
