//! A schedule's occurrence in a turn. A `message` is posted verbatim, with no model call:
//! the turn's first write (a late one after a notice saying when it was due). A `prompt`
//! is a turn like any other, whose trigger is the occurrence (`context` shows it to the
//! model as the asker's scheduled request); nothing here runs for it.
//!
//! A crash mid-way leaves the turn running; resumed, it makes the same writes with the
//! same ids, so nothing is posted twice.

use super::notices::{self, PostError};
use super::{Error, Outcome, Scope, Turns};
use crate::blocks::Rich;
use crate::outbox::{self, Write, WriteId};
use crate::render;
use crate::schedules::{Body, Bounds, EVENT_TYPE, Occurrence, Ticker, when};
use crate::store::{StoredEvent, TurnRow};
use crate::strings;

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

impl Turns {
    /// Schedules made in turns wake `kit`'s ticker, within its bounds.
    pub fn with_schedules(self, kit: ScheduleKit) -> Self {
        Self { schedules: kit, ..self }
    }

    /// When `events` are a schedule's message: posts it and says how the turn ended.
    pub(super) async fn post_scheduled(
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
        if o.late {
            let tz = zone_of(&self.store, &scope.asker, self.schedules.timezone).await?.unwrap_or(chrono_tz::UTC);
            let text = strings::schedule_late(&when::spoken(o.due, tz));
            match notices::post(&self.outbox, scope, WriteId { turn: turn.id, seq: 0 }, &text, true).await {
                Ok(()) => {}
                Err(PostError::Later(why)) => return Err(Error::Suspended(why)),
                Err(PostError::Failed(why)) => return Ok(Some(Outcome::PostFailed(why))),
            }
        }
        let key = self.limits.key;
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
            Body::Prompt(_) => return Ok(None),
        };
        let content = match content {
            Ok(c) => c,
            Err(e) => return Ok(Some(Outcome::PostFailed(format!("the scheduled message cannot be sent: {e}")))),
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
                Ok(Some(Outcome::Scheduled))
            }
            Err(e @ (outbox::Error::Unavailable(_) | outbox::Error::Store(_))) => Err(Error::Suspended(e.to_string())),
            Err(e) => Ok(Some(Outcome::PostFailed(e.to_string()))),
        }
    }
}
