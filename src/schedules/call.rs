//! The model's schedule tools: `schedule` (make one), `schedules` (the asker's, with their
//! next times) and `unschedule` (cancel one of the asker's). What the model is told of
//! them, and the pure check of a call, every error at its path. A message is checked now
//! (a rich one by the same `plan` as `rich_send`) and posted verbatim when it fires;
//! whether the room is the asker's, and their counts, are the turn's to check.

use chrono_tz::Tz;
use serde_json::{Map, Value, json};

use super::delay::CallTime;
use super::when::{self, When};
use super::{Bounds, HORIZON_MS};
use crate::agent::ToolSpec;
use crate::blocks::cut;
use crate::tools::args;
use crate::tools::{
    MAX_FALLBACK, RICH_SEND, RichCall, RoomTarget, SCHEDULE, SCHEDULES, ToolError, ToolErrorCode, UNSCHEDULE, plan,
};

use ToolErrorCode::InvalidArguments;

/// Characters of a prompt, and of a title, at most.
pub const MAX_PROMPT: usize = 2000;
pub const MAX_TITLE: usize = 100;

/// What an occurrence does.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Posts this CommonMark text.
    Text(String),
    /// Posts this checked rich message.
    Rich { payload: Value, fallback: String },
    /// Runs a turn for the asker with this as its trigger.
    Prompt(String),
}

impl Body {
    pub fn kind(&self) -> &'static str {
        if matches!(self, Body::Prompt(_)) { "prompt" } else { "message" }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Body::Text(text) => json!({"text": text}),
            Body::Rich { payload, fallback } => json!({"payload": payload, "fallback": fallback}),
            Body::Prompt(prompt) => json!({"prompt": prompt}),
        }
    }

    pub fn from_value(v: &Value) -> Option<Self> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        match (s("text"), s("prompt"), v.get("payload"), s("fallback")) {
            (Some(text), None, None, _) => Some(Body::Text(text)),
            (None, Some(prompt), None, _) => Some(Body::Prompt(prompt)),
            (None, None, Some(payload), Some(fallback)) => Some(Body::Rich { payload: payload.clone(), fallback }),
            _ => None,
        }
    }

    /// A line for lists: the prompt or the message's first words.
    pub fn summary(&self) -> String {
        let text = match self {
            Body::Text(t) | Body::Prompt(t) | Body::Rich { fallback: t, .. } => t,
        };
        cut(text.lines().next().unwrap_or_default(), 80)
    }
}

/// A checked `schedule` call.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    pub when: When,
    pub body: Body,
    pub room: RoomTarget,
    pub title: Option<String>,
}

/// A checked call of one of the three tools.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleCall {
    Create(NewSchedule),
    /// The asker's schedules: in this chat, or (`all_rooms`) everywhere.
    List {
        all_rooms: bool,
    },
    Cancel {
        id: i64,
    },
}

/// The three tools' specs.
pub fn schedule_specs() -> Vec<ToolSpec> {
    let object = |properties: Value, required: &[&str]| {
        let mut schema = json!({"type": "object", "properties": properties, "additionalProperties": false});
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema
    };
    vec![
        ToolSpec {
            name: SCHEDULE.to_owned(),
            description: "Set a reminder: post message (its text, or {payload, fallback}) to the asker later, \
                 once (at: RFC 3339 or a delay) or repeatedly (every: an RRULE in tz); or \
                 give prompt instead, to be asked then. Example: {\"at\": \"in 10 minutes\", \"message\": \"Time to \
                 stand up!\"}. Returns its id and next times."
                .to_owned(),
            parameters: object(
                json!({
                    "at": {"type": "string"},
                    "every": {"type": "string", "description": "e.g. FREQ=DAILY;BYHOUR=9"},
                    // An IANA zone (the asker's by default) and an RFC 3339 start (now by
                    // default): what a model would write anyway, so the prompt does not say it.
                    "tz": {"type": "string"},
                    "start": {"type": "string"},
                    "message": {},
                    "prompt": {"type": "string"},
                    // As in rich_send, which says what it may name.
                    "room": {"type": "string"},
                    "title": {"type": "string"},
                }),
                &[],
            ),
        },
        ToolSpec {
            name: SCHEDULES.to_owned(),
            description: "List the asker's schedules: ids and next times.".to_owned(),
            parameters: object(json!({"all_rooms": {"type": "boolean"}}), &[]),
        },
        ToolSpec {
            name: UNSCHEDULE.to_owned(),
            description: "Cancel the asker's schedule id.".to_owned(),
            parameters: object(json!({"id": {"type": "integer"}}), &["id"]),
        },
    ]
}

fn at(path: &str, error: impl Into<String>) -> ToolError {
    ToolError::at(InvalidArguments, path, error)
}

/// Checks a call of `name` made at `time`; `tz` is the asker's zone, for `every` without
/// one.
pub fn plan_schedule(
    name: &str,
    args: &Value,
    time: CallTime,
    tz: Tz,
    bounds: &Bounds,
) -> Result<ScheduleCall, ToolError> {
    let empty = Map::new();
    let args = match args {
        Value::Object(map) => map,
        Value::Null => &empty,
        _ => return Err(ToolError::new(InvalidArguments, "arguments must be a JSON object")),
    };
    let allowed: &[&str] = match name {
        SCHEDULE => &["at", "every", "tz", "start", "message", "prompt", "room", "title"],
        SCHEDULES => &["all_rooms"],
        _ => &["id"],
    };
    if let Some(unknown) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        let unknown = cut(unknown, 40);
        return Err(at(&unknown, format!("unknown argument \"{unknown}\" (allowed: {})", allowed.join(", "))));
    }
    let given = |k: &str| args.get(k).filter(|v| !v.is_null());
    match name {
        SCHEDULES => {
            let all_rooms = match given("all_rooms") {
                None => false,
                Some(v) => args::boolean(v).ok_or_else(|| at("all_rooms", "all_rooms must be true or false"))?,
            };
            Ok(ScheduleCall::List { all_rooms })
        }
        UNSCHEDULE => {
            let id = given("id").and_then(args::integer).filter(|id| *id > 0);
            Ok(ScheduleCall::Cancel { id: id.ok_or_else(|| at("id", "id must be a schedule's id (a number)"))? })
        }
        _ => create(args, time, tz, bounds).map(ScheduleCall::Create),
    }
}

fn create(args: &Map<String, Value>, time: CallTime, tz: Tz, bounds: &Bounds) -> Result<NewSchedule, ToolError> {
    let now = time.now;
    let given = |k: &str| args.get(k).filter(|v| !v.is_null());
    let string = |k: &str| -> Result<Option<&str>, ToolError> {
        given(k).map(|v| v.as_str().ok_or_else(|| at(k, format!("{k} must be a string")))).transpose()
    };
    let when = match (string("at")?, string("every")?) {
        (Some(_), Some(_)) => return Err(at("every", "give at (once) or every (repeatedly), not both")),
        (None, None) => {
            return Err(at(
                "at",
                "say when: at (an RFC 3339 time, or a delay such as \"in 2 minutes\") or every (an RRULE)",
            ));
        }
        (Some(t), None) => {
            if given("start").is_some() {
                return Err(at("start", "start goes with every; at is the time itself"));
            }
            // tz reads an at without an offset (small models give both); else the asker's.
            let zone = string("tz")?.map(when::zone).transpose().map_err(|e| at("tz", e))?.unwrap_or(tz);
            let t = match super::delay::millis(t) {
                Some(delay) => time.after(delay),
                None => {
                    when::time_in(t, zone).map_err(|e| at("at", format!("{e}, or a delay such as \"in 2 minutes\"")))?
                }
            };
            if t <= now {
                return Err(at("at", format!("{} is in the past; it is {} now", iso(t), iso(now))));
            }
            When::At(t)
        }
        (None, Some(rule)) => {
            let tz = string("tz")?.map(when::zone).transpose().map_err(|e| at("tz", e))?.unwrap_or(tz);
            let start = match string("start")? {
                Some(s) => when::time(s).map_err(|e| at("start", e))?,
                // This minute: a rule without BYSECOND fires on the minute.
                None => now - now.rem_euclid(60_000),
            };
            let rule = when::rule(rule, tz, start).map_err(|e| at("every", e))?;
            let every = When::Every { rule, tz, start };
            check_often(&every, now, bounds.min_interval)?;
            every
        }
    };
    match when.next_after(now) {
        None => return Err(at(if matches!(when, When::At(_)) { "at" } else { "every" }, "it never fires after now")),
        Some(first) if first > now + HORIZON_MS => {
            let path = if matches!(when, When::At(_)) { "at" } else { "start" };
            return Err(at(path, format!("{} is more than a year ahead; schedule it within a year", iso(first))));
        }
        Some(_) => {}
    }
    let body = match (given("message"), string("prompt")?) {
        (Some(_), Some(_)) => return Err(at("prompt", "give message or prompt, not both")),
        (None, None) => return Err(at("message", "say what to do: message (posted as it is) or prompt")),
        (None, Some(p)) if p.trim().is_empty() => return Err(at("prompt", "prompt is empty")),
        (None, Some(p)) if p.chars().count() > MAX_PROMPT => {
            return Err(at("prompt", format!("prompt is longer than {MAX_PROMPT} characters")));
        }
        (None, Some(p)) => Body::Prompt(p.trim().to_owned()),
        (Some(m), None) => message(m)?,
    };
    let room = match string("room")?.map(str::trim) {
        None | Some("") => RoomTarget::Here,
        Some(r) if r.eq_ignore_ascii_case("dm") => RoomTarget::Dm,
        Some(r) => RoomTarget::Named(r.to_owned()),
    };
    let title = match string("title")?.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) if t.chars().count() > MAX_TITLE => {
            return Err(at("title", format!("title is longer than {MAX_TITLE} characters")));
        }
        t => t.map(str::to_owned),
    };
    Ok(NewSchedule { when, body, room, title })
}

/// A message: text, or a rich message checked as `rich_send` checks it (errors under
/// `message`).
fn message(m: &Value) -> Result<Body, ToolError> {
    // `{"text": …}` (or `body`) alone is text, as small models write it.
    let text = m.as_str().or_else(|| match m.as_object() {
        Some(map) if map.len() == 1 => map.get("text").or_else(|| map.get("body")).and_then(Value::as_str),
        _ => None,
    });
    if let Some(text) = text {
        return match text.trim() {
            "" => Err(at("message", "message is empty")),
            t if t.chars().count() > MAX_FALLBACK => {
                Err(at("message", format!("message is longer than {MAX_FALLBACK} characters")))
            }
            t => Ok(Body::Text(t.to_owned())),
        };
    }
    let Some(map) = m.as_object() else {
        return Err(at("message", "message must be text or {\"payload\": ..., \"fallback\": ...}"));
    };
    if let Some(other) = map.keys().find(|k| !["payload", "fallback"].contains(&k.as_str())) {
        return Err(at(&format!("message.{}", cut(other, 40)), "a message has only payload and fallback"));
    }
    match plan(RICH_SEND, m) {
        Ok(RichCall::Send { payload, fallback, .. }) => Ok(Body::Rich { payload: payload.to_value(), fallback }),
        Ok(RichCall::Edit { .. }) => Err(at("message", "message must be a new message")),
        Err(e) => Err(ToolError { path: Some(format!("message.{}", e.path.as_deref().unwrap_or("payload"))), ..e }),
    }
}

/// Refuses a rule that fires more often than `min_interval` (looked at over its next
/// hundred times).
fn check_often(every: &When, now: i64, min_interval: std::time::Duration) -> Result<(), ToolError> {
    let times = every.after(now, 100);
    if let Some(gap) = times.windows(2).map(|w| w[1] - w[0]).min()
        && gap < crate::clock::ms(min_interval)
    {
        return Err(at(
            "every",
            format!(
                "it fires every {} s; schedules fire at most every {} s here (schedules.min_interval_secs): use a \
                 longer INTERVAL or a coarser FREQ",
                gap / 1000,
                min_interval.as_secs()
            ),
        ));
    }
    Ok(())
}

fn iso(ms: i64) -> String {
    crate::clock::rfc3339(ms)
}

#[cfg(test)]
mod tests;
