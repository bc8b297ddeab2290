//! Schedules: a message or a prompt for later ("remind me tomorrow at 9", "every Monday
//! at 9:00 post the sprint summary here", "check the deploy in an hour and tell me").
//!
//! - `when`: the times (once, or an RFC 5545 rule in an IANA zone), pure.
//! - `call`: the model's `schedule` / `schedules` / `unschedule` tools: what it is told,
//!   and the pure check of its arguments, with errors at their path.
//! - `due`: what the ticker does with a schedule that is due, pure: fire its latest
//!   occurrence (marked late when it is), skip older ones, or stop.
//! - `ticker`: the task that fires due occurrences, woken when a schedule is made.
//!
//! Expanding a rule is CPU work that a hostile rule makes long: it runs off the async
//! workers ([`off_workers`]), at most `when`'s bound of steps, and a `COUNT` is made an
//! `UNTIL` when the schedule is made, so every recurrence can be started again from its
//! latest time instead of expanded from its first for ever.
//!
//! **Exactly once.** An occurrence fires by becoming an event in the room's inbox
//! ([`EVENT_TYPE`], its id made of the schedule's and the occurrence's, [`event_id`]),
//! then the schedule's `next_at` moves on. The inbox takes an event id once, so two
//! instances, or a crash between the two steps, fire it once. From there it is the room
//! stage's, like any event: one turn claims it, a `message` is posted verbatim through the
//! outbox (its write id is the turn's), a `prompt` runs a turn for the asker with the
//! prompt as its trigger (budgets, approvals, the pace, encryption). The homeserver never
//! sends events of [`EVENT_TYPE`]: the inbox drops any that come from it.

pub mod call;
pub mod delay;
pub mod due;
pub mod ticker;
pub mod when;

use std::time::Duration;

use ruma::OwnedEventId;
use serde_json::{Value, json};

pub use call::{Body, NewSchedule, ScheduleCall, plan_schedule, schedule_specs};
pub use delay::CallTime;
pub use ticker::Ticker;
pub use when::When;

/// Whether an agents' client may still post in a room, asked when its schedule comes due
/// (the channel answers: `channel`, above the room stage that asks). A client removed from
/// the config, or narrowed to other rooms, has its schedules stopped.
#[async_trait::async_trait]
pub trait ClientRooms: Send + Sync + std::fmt::Debug {
    /// `Ok(None)`: it may; `Ok(Some(why))`: it may not, and why; `Err`: this cannot be
    /// told now (the homeserver is down), ask again later.
    async fn may_still_post(&self, client: &str, room: &ruma::RoomId) -> Result<Option<String>, String>;
}

/// Runs `work` on a blocking thread, off the async workers that serve every room: it
/// expands rules (`when`), and a sparse rule (one that matches rarely) takes up to
/// `when`'s bound of steps to say so. Every expansion outside the pure tests goes here.
pub async fn off_workers<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("a schedule's expansion was cancelled: {e}"),
    }
}

/// The type of the inbox event an occurrence becomes.
pub const EVENT_TYPE: &str = "org.richbot.schedule";

/// The limits of `[schedules]`.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Active schedules per asker, and per room.
    pub per_user: u32,
    pub per_room: u32,
    /// A recurrence fires at most this often.
    pub min_interval: Duration,
    /// A missed occurrence still fires this late (marked late); older ones are skipped.
    pub max_late: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self { per_user: 20, per_room: 50, min_interval: Duration::from_secs(60), max_late: Duration::from_secs(3600) }
    }
}

/// How far ahead a schedule may start: a year.
pub const HORIZON_MS: i64 = 366 * 86_400_000;

/// An occurrence fired this long after its time is marked late.
pub const LATE_AFTER_MS: i64 = 60_000;

/// The id of the inbox event of `schedule`'s occurrence `due`.
pub fn event_id(schedule: i64, due: i64) -> OwnedEventId {
    OwnedEventId::try_from(format!("$richbot.schedule.{schedule}.{due}")).expect("a valid event id")
}

/// The content of that event: what to do, and when it was due.
pub fn occurrence(schedule: i64, due: i64, late: bool, title: Option<&str>, body: &Body) -> Value {
    json!({"schedule": schedule, "due": due, "late": late, "title": title, "what": body.to_value()})
}

/// An occurrence, read back from its event's content.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    pub schedule: i64,
    pub due: i64,
    pub late: bool,
    pub title: Option<String>,
    pub body: Body,
}

impl Occurrence {
    pub fn read(content: &Value) -> Option<Self> {
        Some(Self {
            schedule: content.get("schedule")?.as_i64()?,
            due: content.get("due")?.as_i64()?,
            late: content.get("late").and_then(Value::as_bool).unwrap_or(false),
            title: content.get("title").and_then(Value::as_str).map(str::to_owned),
            body: Body::from_value(content.get("what")?)?,
        })
    }
}

/// A stored schedule's times, read back (`None`: a row no build of richbot could write).
pub fn when_of(row: &crate::store::ScheduleRow) -> Option<When> {
    match (row.at_ms, &row.rrule) {
        (Some(at), None) => Some(When::At(at)),
        (None, Some(rule)) => {
            let tz = when::zone(&row.tz).ok()?;
            Some(When::Every { rule: rule.clone(), tz, start: row.start_ms? })
        }
        _ => None,
    }
}

/// A stored schedule's times and the zone they are told in (its rule's, else the one it
/// was made in, else UTC).
fn when_in_zone(row: &crate::store::ScheduleRow) -> (Option<When>, chrono_tz::Tz) {
    let when = when_of(row);
    let tz = when.as_ref().and_then(When::zone).or_else(|| when::zone(&row.tz).ok()).unwrap_or(chrono_tz::UTC);
    (when, tz)
}

/// A stored schedule's body, read back.
pub fn body_of(row: &crate::store::ScheduleRow) -> Option<Body> {
    Body::from_value(&serde_json::from_str(&row.body).ok()?)
}

/// A schedule as the model and the agents' channel see it: its id, what and where, its
/// rule or time, and its next `n` times in its zone (RFC 3339 with the offset).
pub fn describe(row: &crate::store::ScheduleRow, now: i64, n: usize) -> Value {
    let (when, tz) = when_in_zone(row);
    let next: Vec<String> =
        when.map(|w| w.after(now - 1, n)).unwrap_or_default().into_iter().map(|t| when::rfc3339_in(t, tz)).collect();
    let body = body_of(row);
    let mut v = json!({
        "id": row.id,
        "room": row.room_id,
        "kind": row.kind,
        "what": body.as_ref().map(Body::summary),
        "title": row.title,
        "tz": tz.name(),
        "next": next,
    });
    match (&row.rrule, row.at_ms) {
        (Some(rule), _) => v["every"] = rule.clone().into(),
        (None, Some(at)) => v["at"] = when::rfc3339_in(at, tz).into(),
        _ => {}
    }
    if let Some(map) = v.as_object_mut() {
        map.retain(|_, x| !x.is_null());
    }
    v
}

/// A schedule in one line for members: `#12 "Stand-up" every FREQ=DAILY;BYHOUR=9 (Europe/Lisbon),
/// next Mon 7 Dec 2026, 09:00: post "Stand-up time!"`.
pub fn line(row: &crate::store::ScheduleRow, now: i64) -> String {
    let (when, tz) = when_in_zone(row);
    let next = when.as_ref().and_then(|w| w.next_after(now - 1)).map(|t| when::spoken(t, tz));
    let title = row.title.as_ref().map(|t| format!(" \"{t}\"")).unwrap_or_default();
    let how = match &row.rrule {
        Some(rule) => format!(" every {rule}"),
        None => " once".to_owned(),
    };
    let what = match body_of(row) {
        Some(Body::Prompt(p)) => format!("ask: \"{}\"", crate::blocks::cut(&p, 80)),
        Some(b) => format!("post: \"{}\"", b.summary()),
        None => String::new(),
    };
    let next = next.map(|n| format!(", next {n}")).unwrap_or_default();
    format!("#{}{title}{how}{next} by {}: {what}", row.id, row.asker)
}
