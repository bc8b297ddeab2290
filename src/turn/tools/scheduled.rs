//! A schedule's occurrence in a turn. A `message` is posted verbatim, with no model call:
//! the turn's first write (a late one after a notice saying when it was due). A `prompt`
//! is a turn like any other, whose trigger is the occurrence (`context` shows it to the
//! model as the asker's scheduled request); nothing here runs for it.
//!
//! A crash mid-way leaves the turn running; resumed, it makes the same writes with the
//! same ids, so nothing is posted twice.

use crate::blocks::Rich;
use crate::blocks::WriterKey;
use crate::clock::now_ms;
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::outbox::{self, Write, WriteId};
use crate::render;
use crate::schedules::{Body, Bounds, EVENT_TYPE, Occurrence, Ticker, when};
use crate::store::Store;
use crate::store::{StoredEvent, TurnRow};
use crate::strings;
use crate::turn::notices::{self, PostError};
use crate::turn::{Error, Outcome, Scope};

/// A schedule whose occurrences failed to be posted this many times in a row is stopped.
pub const MAX_POST_FAILURES: i64 = 3;

/// Where the "your schedule stopped" notice goes among the turn's writes.
const STOPPED_SEQ: i64 = 2;

/// What turns need of schedules.
#[derive(Debug, Clone, Default)]
pub struct ScheduleKit {
    /// Wakes the ticker when a schedule is made (none: the ticker looks by itself).
    pub ticker: Option<Ticker>,
    pub bounds: Bounds,
    /// The deployment's zone (`bot.timezone`), for members who set none.
    pub timezone: Option<chrono_tz::Tz>,
}

/// The zone of `user`, when known: their own (`!timezone`), else `default` (the
/// deployment's `bot.timezone`).
pub async fn zone_of(
    store: &crate::store::Store,
    user: &ruma::UserId,
    default: Option<chrono_tz::Tz>,
) -> Result<Option<chrono_tz::Tz>, crate::store::Error> {
    let own = store.user_timezone(user).await?;
    Ok(own.and_then(|z| when::zone(&z).ok()).or(default))
}

/// What posting a due schedule's message needs of the turn stage.
pub(in crate::turn) struct Occurrences<'a> {
    pub store: &'a Store,
    pub outbox: &'a Outbox,
    pub metrics: &'a Metrics,
    /// The deployment's zone (`bot.timezone`), for askers who set none.
    pub timezone: Option<chrono_tz::Tz>,
    /// The content key rich payloads are written under.
    pub key: WriterKey,
}

impl Occurrences<'_> {
    /// When `events` are a schedule's message: posts it and says how the turn ended. A
    /// schedule whose posts failed [`MAX_POST_FAILURES`] times in a row is stopped, and
    /// its asker told in their DM with the persona (the room is where posting fails).
    pub(in crate::turn) async fn post(
        &self,
        turn: &TurnRow,
        scope: &Scope,
        events: &[StoredEvent],
    ) -> Result<Option<Outcome>, Error> {
        let Some(occurrence) = events.iter().find(|e| e.event_type == EVENT_TYPE) else { return Ok(None) };
        let Some(o) = Occurrence::read(occurrence.content()) else { return Ok(None) };
        if matches!(o.body, Body::Prompt(_)) {
            return Ok(None);
        }
        // Media it may no longer show (or never could: made before this was checked) stop it.
        if let Body::Rich { payload, .. } = &o.body
            && let Err(e) = crate::turn::media::uploads::media_allowed(self.store, scope, payload).await
        {
            let why = format!("its message shows media its asker may not show ({})", e.error);
            let told = strings::schedule_stopped_media(o.schedule, o.title.as_deref());
            self.stop(turn, scope, &o, &why, &told).await?;
            return Ok(Some(Outcome::PostFailed(why)));
        }
        let outcome = self.post_occurrence(turn, scope, &o).await?;
        match &outcome {
            Outcome::PostFailed(why) => {
                let failures = self.store.schedule_post_failed(o.schedule).await?;
                tracing::warn!(schedule = o.schedule, room = %scope.room, failures, why, "a scheduled message was not posted");
                if failures >= MAX_POST_FAILURES {
                    let reason = format!("its last {MAX_POST_FAILURES} posts failed ({why})");
                    let told = strings::schedule_stopped_failing(
                        o.schedule,
                        o.title.as_deref(),
                        &scope.room,
                        MAX_POST_FAILURES,
                    );
                    self.stop(turn, scope, &o, &reason, &told).await?;
                }
            }
            _ => self.store.schedule_posted(o.schedule).await?,
        }
        Ok(Some(outcome))
    }

    /// Stops schedule `o` for `reason` (logged, kept with it) and tells its asker `told`.
    async fn stop(&self, turn: &TurnRow, scope: &Scope, o: &Occurrence, reason: &str, told: &str) -> Result<(), Error> {
        if !self.store.end_schedule(o.schedule, "stopped", reason, now_ms()).await? {
            return Ok(());
        }
        Metrics::inc(&self.metrics.schedules_stopped);
        tracing::warn!(schedule = o.schedule, room = %scope.room, reason, "schedule stopped");
        // A member's schedule is told in their DM with the persona; an agent client's (the
        // persona's own) has no one to tell but the log.
        if scope.asker == scope.persona {
            return Ok(());
        }
        let dm = match super::targets::resolve(self.store, self.outbox, scope, &crate::tools::RoomTarget::Dm).await {
            Ok(dm) => dm,
            Err(e) => {
                tracing::warn!(schedule = o.schedule, error = %e.error, "could not open a DM to say a schedule stopped");
                return Ok(());
            }
        };
        let dm = Scope { room: dm, is_dm: true, thread: None, reply_to: None, ..scope.clone() };
        match notices::post(self.outbox, &dm, WriteId { turn: turn.id, seq: STOPPED_SEQ }, told, true).await {
            Ok(()) => Ok(()),
            Err(PostError::Later(why)) => Err(Error::Suspended(why)),
            Err(PostError::Failed(why)) => {
                tracing::warn!(schedule = o.schedule, why, "could not tell the asker their schedule stopped");
                Ok(())
            }
        }
    }

    /// Posts occurrence `o`'s message (after a note when it is late).
    async fn post_occurrence(&self, turn: &TurnRow, scope: &Scope, o: &Occurrence) -> Result<Outcome, Error> {
        if o.late {
            let tz = zone_of(self.store, &scope.asker, self.timezone).await?.unwrap_or(chrono_tz::UTC);
            let text = strings::schedule_late(&when::spoken(o.due, tz));
            match notices::post(self.outbox, scope, WriteId { turn: turn.id, seq: 0 }, &text, true).await {
                Ok(()) => {}
                Err(PostError::Later(why)) => return Err(Error::Suspended(why)),
                Err(PostError::Failed(why)) => return Ok(Outcome::PostFailed(why)),
            }
        }
        let key = self.key;
        let content = match &o.body {
            Body::Text(text) => render::text(text, None),
            Body::Rich { payload, fallback } => {
                let rich = Rich::checked(payload.clone()).ok();
                let math = rich.as_ref().map(Rich::find_math).unwrap_or_default();
                let message = render::Message {
                    fallback,
                    payload: Some(payload),
                    key,
                    math: &math,
                    pictures: render::Pictures::default(),
                };
                render::message(message, render::Relation::default())
            }
            Body::Prompt(_) => return Ok(Outcome::NoReply),
        };
        let content = match content {
            Ok(c) => c,
            Err(e) => return Ok(Outcome::PostFailed(format!("the scheduled message cannot be sent: {e}"))),
        };
        let write = Write { id: WriteId { turn: turn.id, seq: 1 }, room: &scope.room, persona: &scope.persona };
        match self.outbox.send(&write, &content, None).await {
            Ok(event_id) => {
                if let Body::Rich { payload, .. } = &o.body {
                    let ids: Vec<String> = Rich::checked(payload.clone())
                        .map(|r| r.buttons().into_iter().filter_map(|b| b.id).collect())
                        .unwrap_or_default();
                    self.store.record_buttons(&scope.room, &scope.persona, &event_id, &ids).await?;
                }
                tracing::info!(schedule = o.schedule, room = %scope.room, %event_id, "scheduled message posted");
                Ok(Outcome::Scheduled)
            }
            Err(e @ (outbox::Error::Unavailable(_) | outbox::Error::Store(_))) => Err(Error::Suspended(e.to_string())),
            Err(e) => Ok(Outcome::PostFailed(e.to_string())),
        }
    }
}
