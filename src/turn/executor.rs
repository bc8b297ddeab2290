//! Runs the model's tool calls for one turn: parse the arguments, `plan` them, authorize
//! (which room, whose message), render the content, and post through the outbox. Every
//! failure becomes a tool result `{"error", "code", "path"}` the model can act on.

use ruma::{OwnedRoomId, RoomId, UserId};
use serde_json::{Value, json};

use super::post::{self, Poster};
use crate::agent::{ToolCall, ToolRunner};
use crate::blocks::WriterKey;
use crate::metrics::Metrics;
use crate::render::{self, Relation};
use crate::store::Store;
use crate::tools::{RichCall, RoomTarget, ToolError, ToolErrorCode, plan};

/// One turn's tool runner.
pub struct Executor<'a> {
    pub metrics: &'a Metrics,
    pub poster: &'a Poster,
    pub store: &'a Store,
    pub turn: i64,
    /// The next write's number within the turn (shared with the final answer).
    pub seq: i64,
    pub room: &'a RoomId,
    pub persona: &'a UserId,
    pub asker: &'a UserId,
    pub is_dm: bool,
    pub key: WriterKey,
    /// The thread the turn answers in: new messages go there unless the model says otherwise.
    pub thread_root: Option<&'a ruma::EventId>,
}

impl ToolRunner for Executor<'_> {
    async fn run(&mut self, call: &ToolCall) -> String {
        let result = self.execute(call).await;
        match result {
            Ok(v) => {
                self.metrics.tool_call(&call.name, "ok");
                if let Some(waited) = v.get("waited_ms").and_then(Value::as_u64) {
                    Metrics::add(&self.metrics.edit_wait_ms, waited);
                }
                v.to_string()
            }
            Err(e) => {
                tracing::info!(tool = %call.name, code = %e.code, error = %e.error, "tool call refused");
                self.metrics.tool_call(&call.name, &e.code.to_string());
                e.to_result()
            }
        }
    }
}

impl Executor<'_> {
    async fn execute(&mut self, call: &ToolCall) -> Result<Value, ToolError> {
        let args: Value = if call.arguments.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&call.arguments).map_err(|e| {
                ToolError::new(
                    ToolErrorCode::InvalidArguments,
                    format!("arguments are not valid JSON ({e}); send one JSON object"),
                )
            })?
        };
        let planned = plan(&call.name, &args)?;
        let seq = self.seq;
        self.seq += 1;
        match planned {
            RichCall::Send { payload, fallback, reply_to, thread, room } => {
                let room = self.resolve_room(&room).await?;
                let thread = thread.as_deref().or(if room == self.room { self.thread_root } else { None });
                let math = payload.find_math();
                let content = render::message(
                    &fallback,
                    Some(&payload.to_value()),
                    self.key,
                    &math,
                    Relation { reply_to: reply_to.as_deref(), thread },
                )
                .map_err(too_large)?;
                let id = self
                    .poster
                    .send(self.turn, seq, &room, self.persona, &content, thread.map(|t| t.as_str()))
                    .await
                    .map_err(post_error)?;
                Ok(json!({"event_id": id}))
            }
            RichCall::Edit { event_id, payload, fallback, room } => {
                let sent = self.store.sent_message(event_id.as_str()).await.map_err(internal)?;
                let sent = sent.filter(|m| m.sender == self.persona.as_str()).ok_or_else(|| {
                    ToolError::at(
                        ToolErrorCode::NotOwner,
                        "event_id",
                        format!("{event_id} is not a message you sent; you can only edit your own messages"),
                    )
                })?;
                // An edit of an edit is aimed at the original.
                let original = match &sent.replaces {
                    Some(o) => ruma::EventId::parse(o).map_err(|_| internal("stored original id"))?,
                    None => event_id.clone(),
                };
                let msg_room = RoomId::parse(&sent.room_id).map_err(|_| internal("stored room id"))?;
                if room != RoomTarget::Here && self.resolve_room(&room).await? != msg_room {
                    return Err(ToolError::at(
                        ToolErrorCode::RoomNotAllowed,
                        "room",
                        "that message is in another room; leave \"room\" out to edit it where it is",
                    ));
                }
                let math = payload.find_math();
                let content = render::edit(&original, &fallback, Some(&payload.to_value()), self.key, &math)
                    .map_err(too_large)?;
                let (id, waited) = self
                    .poster
                    .edit(self.turn, seq, &msg_room, self.persona, &original, &content)
                    .await
                    .map_err(post_error)?;
                Ok(json!({"event_id": id, "edited": original, "waited_ms": waited}))
            }
        }
    }

    async fn resolve_room(&self, target: &RoomTarget) -> Result<OwnedRoomId, ToolError> {
        match target {
            RoomTarget::Here => Ok(self.room.to_owned()),
            RoomTarget::Dm if self.is_dm => Ok(self.room.to_owned()),
            RoomTarget::Dm => {
                if let Some(room) =
                    self.store.dm_room(self.persona.as_str(), self.asker.as_str()).await.map_err(internal)?
                {
                    let joined = self.store.joined_members(&room).await.map_err(internal)?;
                    if joined.iter().any(|u| u == self.asker.as_str())
                        && joined.iter().any(|u| u == self.persona.as_str())
                    {
                        return RoomId::parse(&room).map_err(|_| internal("stored room id"));
                    }
                }
                let room = self.poster.matrix.create_dm(self.persona, self.asker).await.map_err(|e| {
                    ToolError::new(
                        ToolErrorCode::SendFailed,
                        format!("could not open a direct chat with {}: {e}", self.asker),
                    )
                })?;
                self.store
                    .set_dm_room(self.persona.as_str(), self.asker.as_str(), room.as_str())
                    .await
                    .map_err(internal)?;
                self.store.set_membership(room.as_str(), self.persona.as_str(), "join").await.map_err(internal)?;
                Ok(room)
            }
            RoomTarget::Named(name) => {
                let refuse = || {
                    ToolError::at(
                        ToolErrorCode::RoomNotAllowed,
                        "room",
                        format!(
                            "you may post only here, in \"dm\", or in a room id where both you and {} are members (got \"{}\")",
                            self.asker,
                            crate::blocks::cut(name, 60)
                        ),
                    )
                };
                let room = RoomId::parse(name.as_str()).map_err(|_| refuse())?;
                let joined = self.store.joined_members(room.as_str()).await.map_err(internal)?;
                let both = joined.iter().any(|u| u == self.asker.as_str())
                    && joined.iter().any(|u| u == self.persona.as_str());
                if both { Ok(room) } else { Err(refuse()) }
            }
        }
    }
}

fn too_large(e: render::Error) -> ToolError {
    match e {
        render::Error::TooLarge(_) => ToolError::new(ToolErrorCode::TooLarge, e.to_string()),
        render::Error::Numbers(b) => ToolError::at(ToolErrorCode::InvalidPayload, b.path.clone(), b.to_string()),
    }
}

fn post_error(e: post::Error) -> ToolError {
    match e {
        post::Error::NotOwner => ToolError::at(
            ToolErrorCode::NotOwner,
            "event_id",
            "not a message you sent; you can only edit your own messages",
        ),
        post::Error::Refused(reason) => {
            ToolError::new(ToolErrorCode::SendFailed, format!("the homeserver refused the message: {reason}"))
        }
        post::Error::Unavailable(reason) => ToolError::new(
            ToolErrorCode::SendFailed,
            format!("the homeserver is unavailable ({reason}); try again later"),
        ),
        post::Error::Store(e) => internal(e),
    }
}

fn internal(e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, "tool call failed inside richbot");
    ToolError::new(ToolErrorCode::SendFailed, "richbot could not complete the call because of an internal error")
}
