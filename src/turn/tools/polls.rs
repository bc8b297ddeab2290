//! Polls in a turn: `rich_poll` posts one in the turn's room (its votes are that room's),
//! `rich_poll_end` ends one the persona started there, and the persona's recent polls in
//! the room, with their tallies, are part of what the model is told (`note`). A poll goes
//! with a message that shows it in clients that draw no polls (`render::poll_message`).

use serde_json::{Value, json};

use super::targets::internal;
use crate::clock::now_ms;
use crate::outbox::Write;
use crate::polls;
use crate::render;
use crate::store::{NewPoll, Store};
use crate::tools::{PollCall, ToolError, ToolErrorCode, plan_poll};
use crate::turn::reach::Reach;
use crate::turn::stop::{Stop, outbox_error};
use crate::turn::{Error, Scope};

/// Polls shown to the model at most, and how long an ended one is still shown.
const SHOWN: i64 = 3;
const SHOWN_AFTER_END_MS: i64 = 7 * 86_400_000;

/// What the model is told of the persona's recent polls in the room (empty: none).
pub(in crate::turn) async fn note(store: &Store, scope: &Scope) -> Result<String, Error> {
    let since = now_ms() - SHOWN_AFTER_END_MS;
    let mut shown = Vec::new();
    for poll in store.room_polls(&scope.room, &scope.persona, since, SHOWN).await? {
        let tally = polls::count(store, &poll).await?;
        shown.push((poll, tally));
    }
    Ok(polls::note(&shown))
}

/// Runs a `rich_poll` or `rich_poll_end` call.
pub(in crate::turn) async fn call(r: &Reach<'_>, name: &str, args: &Value) -> Result<Value, Stop> {
    let scope = r.scope;
    match plan_poll(name, args)? {
        PollCall::Start { question, answers, disclosed, end_after_secs } => {
            r.count_write()?;
            let content = polls::start_content(&question, &answers, disclosed);
            let write = Write { id: r.take_write(), room: &scope.room, persona: &scope.persona };
            let event_id = r.outbox.send_event(&write, polls::START, &content).await.map_err(outbox_error)?;
            // Shown in every client: the poll as a message, the next write of the turn.
            let shown = render::poll_message(&question, &answers, disclosed, end_after_secs);
            let write = Write { id: r.take_write(), ..write };
            let text_event_id = r.outbox.send(&write, &shown, None).await.map_err(outbox_error)?;
            let now = now_ms();
            let end_at = end_after_secs.map(|s| now + i64::try_from(s).unwrap_or(0) * 1000);
            let poll = NewPoll {
                event_id: &event_id,
                room_id: &scope.room,
                persona: &scope.persona,
                question: &question,
                answers: &answers,
                disclosed,
                created_at: now,
                end_at,
                text_event_id: &text_event_id,
            };
            r.store.record_poll(&poll).await.map_err(|e| Stop::Suspend(format!("store: {e}")))?;
            if let (Some(closer), Some(_)) = (r.kit.polls, end_at) {
                closer.started();
            }
            Ok(json!({"event_id": event_id, "shown_by": text_event_id}))
        }
        PollCall::End { poll } => {
            let row = r.store.poll(&poll).await.map_err(internal)?;
            let Some(row) = row.filter(|p| p.persona == scope.persona && p.room_id == scope.room) else {
                return Err(Stop::Tool(ToolError::at(
                    ToolErrorCode::NotOwner,
                    "poll",
                    format!("{poll} is not a poll you started in this chat"),
                )));
            };
            if row.ended_at.is_some() {
                let tally = polls::count(r.store, &row).await.map_err(internal)?;
                return Ok(json!({"poll": poll, "already_ended": true, "result": tally.result()}));
            }
            r.count_write()?;
            let (ended, result) = polls::end(r.store, r.outbox, &row).await.map_err(outbox_error)?;
            Ok(json!({"event_id": ended, "poll": poll, "result": result}))
        }
    }
}
