//! Schedules over the channel: a client schedules messages (text, or a rich message
//! checked now) for rooms and people it may post to, lists its own, and cancels them:
//! `POST /v1/schedules`, `GET /v1/schedules`, `DELETE /v1/schedules/{id}`, and the MCP
//! tools `schedule`, `schedules`, `unschedule`. The times and their checks are the model's
//! (`schedules::plan_schedule`), refusals the channel's failure object. The channel never
//! runs the model, so a `prompt` is refused: that is for members, through the persona.
//!
//! A client's schedule is the persona's own (its asker is the persona) and its origin
//! names the client and the idempotency key: the same key makes no second schedule, and
//! a client sees and cancels only its own. Each client has its own bound
//! (`schedules.per_user`): clients of one persona need not trust each other. Each
//! occurrence fires once, as members' do; one whose client is gone from the config, or
//! may no longer post in its room, is stopped when it comes due (`ClientRooms`).

use serde_json::{Map, Value, json};

use super::{Channel, Client, Failure, parse};
use crate::clock::now_ms;
use crate::schedules::{self, CallTime, ScheduleCall, When, plan_schedule};
use crate::store::{NewScheduleRow, Over, ScheduleRow};
use crate::tools::SCHEDULE;

/// The arguments of a new schedule: where, as `send` says it, and when and what, as the
/// model's `schedule` says it.
const ALLOWED: &[&str] =
    &["channel", "kind", "to", "at", "every", "tz", "start", "message", "prompt", "title", "idempotency_key"];

/// Next times shown.
const SHOWN: usize = 3;

impl Channel {
    /// Makes a schedule for `client` (the first one again, for a repeated key).
    pub async fn schedule(&self, client: &Client, args: &Value) -> Result<Value, Failure> {
        let map = parse::object(args, ALLOWED)?;
        if map.get("prompt").is_some_and(|p| !p.is_null()) {
            return Err(Failure::invalid(
                "prompt",
                "the agents' channel schedules messages (message: text or {payload, fallback}); a prompt runs the \
                 model, which this channel never does",
            ));
        }
        let (direct, to) = parse::destination(map)?;
        let key = parse::string(map, "idempotency_key")?;
        let when_what: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| ["at", "every", "tz", "start", "message", "title"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let now = now_ms();
        let (bounds, zone) = (self.schedules.bounds, self.schedules.timezone.unwrap_or(chrono_tz::UTC));
        let planned = schedules::off_workers(move || {
            plan_schedule(SCHEDULE, &Value::Object(when_what), CallTime::now(now), zone, &bounds)
        });
        let ScheduleCall::Create(new) = planned.await? else {
            return Err(Failure::internal("a schedule call that makes none"));
        };
        let room = self.room_for(client, direct, &to).await?;
        let when = new.when.clone();
        let next = schedules::off_workers(move || when.next_after(now)).await;
        let (at_ms, rrule, tz, start_ms) = match &new.when {
            When::At(at) => (Some(*at), None, zone, None),
            When::Every { rule, tz, start } => (None, Some(rule.as_str()), *tz, Some(*start)),
        };
        let key = key.unwrap_or_else(|| format!("{:016x}", rand::random::<u64>()));
        let origin = format!("{}{key}", prefix(client));
        let body = new.body.to_value().to_string();
        let row = NewScheduleRow {
            origin: &origin,
            room_id: &room,
            persona: &client.persona,
            asker: &client.persona,
            title: new.title.as_deref(),
            kind: new.body.kind(),
            body: &body,
            at_ms,
            rrule,
            tz: tz.name(),
            start_ms,
            next_at: next.unwrap_or(now),
            created_at: now,
            client: Some(&client.name),
        };
        let id = match self.store.create_schedule(&row, bounds.per_user, bounds.per_room).await {
            Ok(Ok(id)) => id,
            Ok(Err(over)) => return Err(too_many(over)),
            Err(e) => return Err(Failure::internal(e)),
        };
        if let Some(ticker) = &self.schedules.ticker {
            ticker.made();
        }
        tracing::info!(client = client.name, schedule = id, %room, "agent client made a schedule");
        let made = self.store.schedule(id).await.map_err(Failure::internal)?;
        let made = made.ok_or_else(|| Failure::internal("the schedule vanished"))?;
        Ok(schedules::off_workers(move || schedules::describe(&made, now, SHOWN)).await)
    }

    /// `client`'s active schedules.
    pub async fn schedules(&self, client: &Client) -> Result<Value, Failure> {
        let now = now_ms();
        let own = self.own(client).await?;
        let listed: Vec<Value> =
            schedules::off_workers(move || own.iter().map(|r| schedules::describe(r, now, SHOWN)).collect()).await;
        Ok(json!({"schedules": listed}))
    }

    /// Cancels one of `client`'s schedules.
    pub async fn unschedule(&self, client: &Client, id: i64) -> Result<Value, Failure> {
        let row = self.store.schedule(id).await.map_err(Failure::internal)?;
        let theirs = row.is_some_and(|r| r.client.as_deref() == Some(client.name.as_str()) && r.state == "active");
        let why = format!("cancelled by agent client {}", client.name);
        if !theirs || !self.store.end_schedule(id, "cancelled", &why, now_ms()).await.map_err(Failure::internal)? {
            return Err(Failure::new(404, "not_found", format!("{id} is not an active schedule of yours")).at("id"));
        }
        tracing::info!(client = client.name, schedule = id, "agent client cancelled a schedule");
        Ok(json!({"id": id, "cancelled": true}))
    }

    async fn own(&self, client: &Client) -> Result<Vec<ScheduleRow>, Failure> {
        let rows = self.store.active_schedules(Some(&client.persona), None).await.map_err(Failure::internal)?;
        Ok(rows.into_iter().filter(|r| r.client.as_deref() == Some(client.name.as_str())).collect())
    }
}

/// The origin of `client`'s schedules, before the key.
fn prefix(client: &Client) -> String {
    format!("agent:{}:", client.name)
}

#[async_trait::async_trait]
impl schedules::ClientRooms for Channel {
    async fn may_still_post(&self, client: &str, room: &ruma::RoomId) -> Result<Option<String>, String> {
        let Some(c) = self.clients.iter().find(|c| c.name == client) else {
            return Ok(Some(format!("its agent client {client} is no longer configured")));
        };
        match self.still_allowed(c, room).await {
            Ok(()) => Ok(None),
            Err(f) if f.status == 403 => Ok(Some(format!("its agent client {client} may no longer post in the room"))),
            Err(f) => Err(f.error),
        }
    }
}

fn too_many(over: Over) -> Failure {
    let error = match over {
        Over::PerUser(n) => {
            format!("this client has {n} active schedules, the most allowed (schedules.per_user); cancel one first")
        }
        Over::PerRoom(n) => {
            format!("that room has {n} active schedules, the most allowed (schedules.per_room); cancel one first")
        }
    };
    Failure::new(409, "limit_reached", error)
}
