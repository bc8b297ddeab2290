//! A `rich_send` or `rich_edit` call: its payload planned with its uploads and charts
//! (`media`), its room settled in the sandbox (`targets`: the asker's rooms, reply and
//! thread targets of that room, and only the persona's own messages edited), rendered,
//! written through the outbox, and its pictures and files posted after it where they
//! cannot be inline. The `send` buttons it offers are recorded, so a press can be told
//! from a typed-in marker.

use ruma::EventId;
use serde_json::{Value, json};

use super::targets::{self, internal};
use crate::agent::ToolCall;
use crate::blocks::Rich;
use crate::outbox::Write;
use crate::render::{self, Relation};
use crate::tools::{RichCall, RoomTarget, ToolError, ToolErrorCode, plan};
use crate::turn::media::planned::{Drawn, Planned};
use crate::turn::media::{attachments, pictures, uploads};
use crate::turn::reach::Reach;
use crate::turn::stop::{Stop, outbox_error, render_error};

pub(in crate::turn) async fn call(r: &Reach<'_>, call: &ToolCall, args: &Value, nth: u32) -> Result<Value, Stop> {
    let Planned { call: planned, encrypted, drawn } = plan_with_uploads(r, &call.name, args, nth).await?;
    let id = r.take_write();
    let scope = r.scope;
    let key = r.limits.key;
    // Pictures inline where they may be shown by URL; in an encrypted room they go as
    // messages of their own.
    let inline: Vec<render::Inline> = drawn.iter().map(Drawn::inline).collect();
    let pictures = if encrypted { render::Pictures::default() } else { render::Pictures::inline(&inline) };
    match planned {
        RichCall::Send { payload, fallback, reply_to, thread, room } => {
            let room = targets::resolve(r.store, r.outbox, scope, &room).await?;
            for (path, event) in [("reply_to", &reply_to), ("thread", &thread)] {
                if let Some(event) = event {
                    targets::event_in_room(r.store, event, &room, path).await?;
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
            let message = render::Message { fallback: &fallback, payload: Some(&value), key, math: &math, pictures };
            let content = render::message(message, relation).map_err(render_error)?;
            let write = Write { id, room: &room, persona: &scope.persona };
            let event_id = r.outbox.send(&write, &content, thread).await.map_err(outbox_error)?;
            record_buttons(r, &room, &event_id, &payload).await?;
            attachments::post_companions(r, &room, thread, &payload, &drawn, encrypted).await?;
            Ok(json!({"event_id": event_id, "posted": crate::strings::POSTED}))
        }
        RichCall::Edit { event_id, payload, fallback, room } => {
            let sent = r.store.sent_message(&event_id).await.map_err(internal)?;
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
            if !targets::joined(r.store, &sent.room_id, &scope.asker).await? {
                return Err(Stop::Tool(ToolError::at(
                    ToolErrorCode::RoomNotAllowed,
                    path,
                    format!("that message is in a room {} is not in; you may edit only there", scope.asker),
                )));
            }
            if room != RoomTarget::Here && targets::resolve(r.store, r.outbox, scope, &room).await? != sent.room_id {
                return Err(Stop::Tool(ToolError::at(
                    ToolErrorCode::RoomNotAllowed,
                    "room",
                    "that message is in another room; leave \"room\" out to edit it where it is",
                )));
            }
            let math = payload.find_math();
            let value = payload.to_value();
            let message = render::Message { fallback: &fallback, payload: Some(&value), key, math: &math, pictures };
            let content = render::edit(original, message).map_err(render_error)?;
            let write = Write { id, room: &sent.room_id, persona: &scope.persona };
            let (id, waited) = r.outbox.edit(&write, original, &content).await.map_err(outbox_error)?;
            record_buttons(r, &sent.room_id, original, &payload).await?;
            Ok(json!({"event_id": id, "edited": original, "waited_ms": waited}))
        }
    }
}

/// Remembers the `send` button ids the message offers, so a press can be told from a
/// typed-in marker.
async fn record_buttons(r: &Reach<'_>, room: &ruma::RoomId, event: &EventId, payload: &Rich) -> Result<(), ToolError> {
    let ids: Vec<String> = payload.buttons().into_iter().filter_map(|b| b.id).collect();
    r.store.record_buttons(room, &r.scope.persona, event, &ids).await.map_err(internal)
}

/// Plans a `rich_send` / `rich_edit` call: checked whole, with stand-ins for its
/// uploads, and its media checked, before the write is counted and anything uploaded;
/// then planned again with the uploads' URLs, and its charts drawn. An edit in an
/// encrypted room draws none: its pictures would go as messages of their own.
async fn plan_with_uploads(r: &Reach<'_>, name: &str, args: &Value, nth: u32) -> Result<Planned, Stop> {
    let (mut args, pending) = uploads::pending_uploads(args)?;
    let planned = plan(name, &args)?;
    let (RichCall::Send { payload, .. } | RichCall::Edit { payload, .. }) = &planned;
    uploads::check_media(r, &payload.to_value()).await?;
    r.count_write()?;
    let room = r.room_of(&planned).await?;
    let encrypted = r.encrypted(&room).await?;
    let call = match pending.is_empty() {
        true => planned,
        false => {
            uploads::upload_pending(r, &mut args, pending, nth, encrypted).await?;
            plan(name, &args)?
        }
    };
    let drawn = match &call {
        RichCall::Edit { .. } if encrypted => Vec::new(),
        RichCall::Send { payload, .. } | RichCall::Edit { payload, .. } => {
            pictures::draw_charts(r, payload, nth, encrypted).await?
        }
    };
    Ok(Planned { call, encrypted, drawn })
}
