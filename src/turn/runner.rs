//! Runs the model's tool calls for one turn: parse the arguments, `plan` them, settle the
//! target room (`targets`, the sandbox: the asker's rooms only, for sends and edits
//! alike, and reply or thread targets of that room), check ownership for edits, count the
//! turn's writes against its cap, upload what the payload carries as `data:` URLs
//! (`uploads`), render the content, and write through the outbox. Every
//! failure becomes a tool result `{"error", "code", "path"}` the model can act on, with a
//! code that says whose fault it is: the call's, a limit's, the homeserver's (for good, or
//! for now), or richbot's.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};

use ruma::EventId;
use serde_json::{Value, json};

use super::deadline::Deadline;
use super::live::Live;
use super::media::planned::{Drawn, Planned};
use super::stop::{Stop, arguments, outbox_error, render_error};
use super::targets::{self, internal};
use super::{Limits, Scope};
use crate::agent::{Suspend, ToolCall, ToolRunner};
use crate::approval::Approvals;
use crate::blocks::Rich;
use crate::mcp::Mcp;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, Write, WriteId};
use crate::render::{self, Relation};
use crate::store::Store;
use crate::tools::Offered;
use crate::tools::registry::Kind;
use crate::tools::{
    RICH_POLL, RICH_POLL_END, RICH_SEND, RichCall, RoomTarget, SCHEDULE_TOOLS, ToolError, ToolErrorCode,
};

/// What a turn's tool calls reach beyond the store and the outbox.
pub struct Kit<'a> {
    pub metrics: &'a Metrics,
    /// The tools this turn offers.
    pub offered: &'a Offered,
    pub mcp: &'a Mcp,
    pub approvals: &'a Approvals,
    /// Stopped while a call waits for the asker.
    pub deadline: &'a Deadline,
    /// Uploads what the turn shows (none without it).
    pub media: Option<&'a crate::media::Media>,
    /// Told when a poll with an end is started.
    pub polls: Option<&'a crate::polls::Closer>,
    /// Schedules' bounds and zone, and the ticker told when one is made.
    pub schedules: &'a super::ScheduleKit,
    /// When the newest message the turn answers arrived (richbot's clock, ms): a delay a
    /// schedule call gives counts from it.
    pub asked_at: i64,
}

/// One turn's tool runner.
pub struct Runner<'a> {
    pub(super) store: &'a Store,
    pub(super) outbox: &'a Outbox,
    live: &'a Live<'a>,
    pub(super) kit: Kit<'a>,
    pub(super) scope: &'a Scope,
    pub(super) turn: i64,
    pub(super) limits: Limits,
    /// The next write's number within the turn (shared with the final answer).
    seq: AtomicI64,
    /// Sends and edits made so far.
    writes: AtomicU32,
    /// Whether a call of the turn posted or edited a message (it came back with its id).
    posted: std::sync::atomic::AtomicBool,
    /// The asker refused (or let time out) an approval in this turn: it asks no more.
    pub(super) declined: AtomicBool,
}

impl<'a> Runner<'a> {
    pub fn new(
        (store, outbox, live): (&'a Store, &'a Outbox, &'a Live<'a>),
        kit: Kit<'a>,
        scope: &'a Scope,
        turn: i64,
        limits: Limits,
    ) -> Self {
        Self {
            store,
            outbox,
            live,
            kit,
            scope,
            turn,
            limits,
            seq: AtomicI64::new(0),
            writes: AtomicU32::new(0),
            posted: std::sync::atomic::AtomicBool::new(false),
            declined: AtomicBool::new(false),
        }
    }

    /// The id of a write made now (the next takes the one after).
    pub(super) fn take_write(&self) -> WriteId {
        WriteId { turn: self.turn, seq: self.seq.fetch_add(1, Ordering::Relaxed) }
    }

    /// Whether the turn's tools posted or edited anything.
    pub fn wrote(&self) -> bool {
        self.posted.load(Ordering::Relaxed)
    }

    /// The id the turn's next write (its final answer) takes.
    pub fn next_write(&self) -> WriteId {
        WriteId { turn: self.turn, seq: self.seq.load(Ordering::Relaxed) }
    }
}

/// A tool call that runs longer than this is shown on the reply's message.
const SLOW_TOOL: std::time::Duration = std::time::Duration::from_secs(2);

impl ToolRunner for Runner<'_> {
    async fn run(&self, call: &ToolCall, nth: u32) -> Result<String, Suspend> {
        let live = self.live;
        let tool = self.kit.offered.get(&call.name);
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
        self.kit.offered.get(name).is_some_and(|t| t.concurrent)
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
        self.kit.metrics.tool_call(&call.name, &e.code.to_string());
        e.to_result()
    }

    /// The tool result for the model, or the suspension of the turn.
    fn settle(&self, call: &ToolCall, result: Result<Value, Stop>) -> Result<String, Suspend> {
        match result {
            Ok(v) => {
                self.kit.metrics.tool_call(&call.name, "ok");
                if v.get("event_id").is_some() {
                    self.posted.store(true, Ordering::Relaxed);
                }
                if let Some(waited) = v.get("waited_ms").and_then(Value::as_u64) {
                    Metrics::add(&self.kit.metrics.edit_wait_ms, waited);
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
        let sends = self.kit.offered.get(&call.name).is_none() && self.kit.offered.get(RICH_SEND).is_some();
        if let Some(rich) = sends.then(|| crate::tools::block_call(&call.name, &args)).flatten() {
            let send = ToolCall { name: RICH_SEND.to_owned(), ..call.clone() };
            return self.execute(&send, &rich, nth).await;
        }
        match self.kit.offered.get(&call.name).map(|t| (t, &t.kind)) {
            Some((tool, Kind::Mcp { server, tool: name })) => self.external(tool, (*server, name), &args, nth).await,
            _ if [RICH_POLL, RICH_POLL_END].contains(&call.name.as_str()) => self.poll(&call.name, &args).await,
            _ if SCHEDULE_TOOLS.contains(&call.name.as_str()) => self.schedule(call, &args).await,
            _ => self.execute(call, &args, nth).await,
        }
    }
}

impl Runner<'_> {
    /// Counts a write against the turn's cap, or refuses it past the cap.
    pub(super) fn count_write(&self) -> Result<(), ToolError> {
        let limit = self.limits.writes_per_turn;
        match self.writes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| (w < limit).then_some(w + 1)) {
            Ok(_) => Ok(()),
            Err(_) => Err(ToolError::new(
                ToolErrorCode::LimitReached,
                format!("at most {limit} messages and edits per turn; finish with text"),
            )),
        }
    }

    async fn execute(&self, call: &ToolCall, args: &Value, nth: u32) -> Result<Value, Stop> {
        let Planned { call: planned, encrypted, drawn } = self.plan_with_uploads(&call.name, args, nth).await?;
        let id = self.take_write();
        let scope = self.scope;
        let key = self.limits.key;
        // Pictures inline where they may be shown by URL; in an encrypted room they go as
        // messages of their own.
        let inline: Vec<render::Inline> = drawn.iter().map(Drawn::inline).collect();
        let pictures = if encrypted { render::Pictures::default() } else { render::Pictures::inline(&inline) };
        match planned {
            RichCall::Send { payload, fallback, reply_to, thread, room } => {
                let room = targets::resolve(self.store, self.outbox, scope, &room).await?;
                for (path, event) in [("reply_to", &reply_to), ("thread", &thread)] {
                    if let Some(event) = event {
                        targets::event_in_room(self.store, event, &room, path).await?;
                    }
                }
                // In the turn's own room a rich answer hangs where a text answer would: in
                // the turn's thread, or (a group room's `reply` mode) as a reply to the
                // question, unless the model said where.
                let here = room == scope.room;
                let thread = thread.as_deref().or(scope.thread.as_deref().filter(|_| here));
                let here_reply = scope.reply_to.as_deref().filter(|_| here && thread.is_none());
                let math = payload.find_math();
                let relation = Relation { reply_to: reply_to.as_deref().or(here_reply), thread };
                let value = payload.to_value();
                let message =
                    render::Message { fallback: &fallback, payload: Some(&value), key, math: &math, pictures };
                let content = render::message(message, relation).map_err(render_error)?;
                let write = Write { id, room: &room, persona: &scope.persona };
                let event_id = self.outbox.send(&write, &content, thread).await.map_err(outbox_error)?;
                self.record_buttons(&room, &event_id, &payload).await?;
                self.post_companions((&room, thread), &payload, &drawn, encrypted).await?;
                Ok(json!({"event_id": event_id, "posted": crate::strings::POSTED}))
            }
            RichCall::Edit { event_id, payload, fallback, room } => {
                let sent = self.store.sent_message(&event_id).await.map_err(internal)?;
                // richbot's own notices (limits, approvals) are not the model's to edit.
                // Nor are polls, which are not messages.
                let notice = |m: &crate::store::SentMessage| {
                    m.content.get("msgtype").is_some_and(|t| t == "m.notice")
                        || m.content.get(crate::polls::START).is_some()
                };
                let sent = sent.filter(|m| m.sender == scope.persona && !notice(m)).ok_or_else(|| {
                    ToolError::at(
                        ToolErrorCode::NotOwner,
                        "event_id",
                        format!("{event_id} is not a message you sent; you can only edit your own messages"),
                    )
                })?;
                // An edit of an edit is aimed at the original.
                let original: &EventId = sent.replaces.as_deref().unwrap_or(&event_id);
                // The sandbox holds for edits too: only in a room the asker is in.
                let path = if room == RoomTarget::Here { "event_id" } else { "room" };
                if !targets::joined(self.store, &sent.room_id, &scope.asker).await? {
                    return Err(Stop::Tool(ToolError::at(
                        ToolErrorCode::RoomNotAllowed,
                        path,
                        format!("that message is in a room {} is not in; you may edit only there", scope.asker),
                    )));
                }
                if room != RoomTarget::Here
                    && targets::resolve(self.store, self.outbox, scope, &room).await? != sent.room_id
                {
                    return Err(Stop::Tool(ToolError::at(
                        ToolErrorCode::RoomNotAllowed,
                        "room",
                        "that message is in another room; leave \"room\" out to edit it where it is",
                    )));
                }
                let math = payload.find_math();
                let value = payload.to_value();
                let message =
                    render::Message { fallback: &fallback, payload: Some(&value), key, math: &math, pictures };
                let content = render::edit(original, message).map_err(render_error)?;
                let write = Write { id, room: &sent.room_id, persona: &scope.persona };
                let (id, waited) = self.outbox.edit(&write, original, &content).await.map_err(outbox_error)?;
                self.record_buttons(&sent.room_id, original, &payload).await?;
                Ok(json!({"event_id": id, "edited": original, "waited_ms": waited}))
            }
        }
    }

    /// Remembers the `send` button ids the message offers, so a press can be told from a
    /// typed-in marker.
    async fn record_buttons(&self, room: &ruma::RoomId, event: &EventId, payload: &Rich) -> Result<(), ToolError> {
        let ids: Vec<String> = payload.buttons().into_iter().filter_map(|b| b.id).collect();
        self.store.record_buttons(room, &self.scope.persona, event, &ids).await.map_err(internal)
    }
}
