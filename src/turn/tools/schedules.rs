//! The schedule tools in a turn: `schedule` makes one for the asker (in a room they are
//! in: the same sandbox as `rich_send`), within the bounds of `[schedules]`; `schedules`
//! lists theirs; `unschedule` cancels one of theirs. A call replayed after a crash makes
//! no second schedule: its origin (the turn and the call) is recorded with the first.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::scheduled::zone_of;
use super::targets::{self, internal};
use crate::agent::ToolCall;
use crate::clock::now_ms;
use crate::schedules::{self, CallTime, ScheduleCall, When, plan_schedule};
use crate::store::{NewScheduleRow, Over};
use crate::tools::{ToolError, ToolErrorCode};
use crate::turn::reach::Reach;
use crate::turn::stop::Stop;

/// Next times a new schedule's result shows.
const SHOWN_TIMES: usize = 3;

/// Runs a `schedule`, `schedules` or `unschedule` call.
pub(in crate::turn) async fn call(r: &Reach<'_>, call: &ToolCall, args: &Value) -> Result<Value, Stop> {
    let (scope, kit, now) = (r.scope, r.kit.schedules, now_ms());
    let tz = zone_of(r.store, &scope.asker, kit.timezone).await.map_err(internal)?.unwrap_or(chrono_tz::UTC);
    let (name, owned, bounds) = (call.name.clone(), args.clone(), kit.bounds);
    let time = CallTime { asked: r.kit.asked_at, now };
    match schedules::off_workers(move || plan_schedule(&name, &owned, time, tz, &bounds)).await? {
        ScheduleCall::Create(new) => {
            let room = targets::resolve(r.store, r.outbox, scope, &new.room).await?;
            // The media a rich message shows are checked as `rich_send` checks them (and
            // again when it is posted).
            if let schedules::Body::Rich { payload, .. } = &new.body {
                crate::turn::media::uploads::media_allowed(r.store, scope, payload).await.map_err(|e| {
                    let path =
                        e.path.as_deref().map_or_else(|| "message.payload".to_owned(), |p| format!("message.{p}"));
                    Stop::Tool(ToolError { path: Some(path), ..e })
                })?;
            }
            let when = new.when.clone();
            let times = schedules::off_workers(move || when.after(now, SHOWN_TIMES)).await;
            let next = times.first().copied().unwrap_or(now);
            let (at_ms, rrule, zone, start_ms) = match &new.when {
                When::At(at) => (Some(*at), None, tz, None),
                When::Every { rule, tz, start } => (None, Some(rule.as_str()), *tz, Some(*start)),
            };
            let body = new.body.to_value().to_string();
            let origin = format!("turn:{}:{}", r.turn, hex(&Sha256::digest(format!("{}\n{args}", call.id))));
            let row = NewScheduleRow {
                origin: &origin,
                room_id: &room,
                persona: &scope.persona,
                asker: &scope.asker,
                title: new.title.as_deref(),
                kind: new.body.kind(),
                body: &body,
                at_ms,
                rrule,
                tz: zone.name(),
                start_ms,
                next_at: next,
                created_at: now,
                client: None,
            };
            let id = match r
                .store
                .create_schedule(&row, kit.bounds.per_user, kit.bounds.per_room)
                .await
                .map_err(internal)?
            {
                Ok(id) => id,
                Err(over) => return Err(Stop::Tool(too_many(over))),
            };
            if let Some(ticker) = &kit.ticker {
                ticker.made();
            }
            tracing::info!(schedule = id, room = %room, asker = %scope.asker, "schedule made");
            let times: Vec<String> = times.into_iter().map(|t| schedules::when::rfc3339_in(t, zone)).collect();
            Ok(json!({"id": id, "room": room, "tz": zone.name(), "next": times, "set": crate::strings::SCHEDULED}))
        }
        ScheduleCall::List { all_rooms } => {
            let room = (!all_rooms).then_some(&*scope.room);
            let rows = r.store.active_schedules(Some(&scope.asker), room).await.map_err(internal)?;
            let listed: Vec<Value> =
                schedules::off_workers(move || rows.iter().map(|r| schedules::describe(r, now, SHOWN_TIMES)).collect())
                    .await;
            Ok(json!({"schedules": listed}))
        }
        ScheduleCall::Cancel { id } => {
            let row = r.store.schedule(id).await.map_err(internal)?;
            let theirs = row.filter(|row| row.asker == scope.asker && row.state == "active");
            if theirs.is_none()
                || !r.store.end_schedule(id, "cancelled", "cancelled by its asker", now).await.map_err(internal)?
            {
                return Err(Stop::Tool(ToolError::at(
                    ToolErrorCode::NotOwner,
                    "id",
                    format!("{id} is not an active schedule of {}; list them with schedules", scope.asker),
                )));
            }
            tracing::info!(schedule = id, asker = %scope.asker, "schedule cancelled");
            Ok(json!({"id": id, "cancelled": true}))
        }
    }
}

/// The refusal of a schedule over a bound: which, and what to do.
pub fn too_many(over: Over) -> ToolError {
    let error = match over {
        Over::PerUser(n) => format!(
            "the person asking has {n} active schedules, the most allowed (schedules.per_user); cancel one with \
             unschedule first"
        ),
        Over::PerRoom(n) => format!(
            "that room has {n} active schedules, the most allowed (schedules.per_room); cancel one with unschedule \
             first"
        ),
    };
    ToolError::new(ToolErrorCode::LimitReached, error)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
