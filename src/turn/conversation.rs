//! The conversation a turn hands the model: the room's history built by `context`, with
//! the media the turn is about made whole. Those are the pictures and files of the
//! turn's own messages, and the ones those messages reply to. They are fetched through
//! `media`, bounded by `[media]`. Older media in the history are only named.
//!
//! Voice messages are made words first (`voice`).
//!
//! A persona whose model cannot see pictures gets them named with why. The member is
//! told once per room, in a notice, so they can describe the picture in words.

use std::collections::HashMap;

use ruma::OwnedEventId;

use super::context::Parts;
use super::media::voice_in::Hearing;
use super::notices::{self, PostError};
use super::tools::polls;
use super::{Error, Press, Scope, Turns, context};
use crate::agent::Message;
use crate::clock::now_ms;
use crate::media::{Kind, Part};
use crate::outbox::WriteId;
use crate::personas::Persona;
use crate::store::StoredEvent;
use crate::strings;
use crate::tools::prompt_line;

/// What a turn answers: its events, and the button presses among them.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub events: &'a [StoredEvent],
    pub presses: &'a [Press],
}

/// Where the "cannot see pictures" notice goes among the turn's writes.
const NO_VISION_SEQ: i64 = 4_000_000;

impl Turns {
    /// The conversation for turn `turn` of `persona`, answering `asked`.
    pub(super) async fn conversation(
        &self,
        turn: i64,
        scope: &Scope,
        persona: &Persona,
        asked: Asked<'_>,
        rooms: &crate::tools::RoomChoices,
        gated: bool,
    ) -> Result<Vec<Message>, Error> {
        let Asked { events, presses } = asked;
        // Everything in the room up to now: the persona's answers posted after the
        // triggering events (a previous turn still running then) included.
        let history = self.store.history(&scope.room, i64::MAX, context::HISTORY_EVENTS).await?;
        // Pictures only for a model that sees: configured so, and its endpoint never
        // refused them.
        let sees = persona.vision && self.llm_of(&persona.user_id).sees();
        // Voice messages transcribed before (by an earlier turn, or this one before a
        // restart) are read back, not transcribed again.
        let voices: Vec<&ruma::EventId> =
            history.iter().filter(|e| Kind::of(&e.event) == Some(Kind::Audio)).map(|e| &*e.event_id).collect();
        let mut known: Parts = self
            .store
            .transcripts(&scope.room, &voices)
            .await?
            .into_iter()
            .map(|(id, (text, seconds))| (id, Part::Spoken { text, seconds }))
            .collect();
        let hearing = Hearing {
            store: &self.store,
            outbox: &self.outbox,
            metrics: &self.metrics,
            budget: &self.budget,
            media: &self.media,
            voice: &self.voice,
        };
        hearing.listen(turn, scope, persona, &history, events, &mut known).await?;
        let parts = match &self.media {
            Some(media) => gather(media, persona, sees, &history, events, known).await,
            None => known,
        };
        let pictures = events.iter().any(|e| Kind::of(&e.event) == Some(Kind::Image));
        if pictures && !sees {
            self.say_no_vision(turn, scope).await?;
        }
        let polls = polls::note(&self.store, scope).await?;
        let asked: Vec<OwnedEventId> = events.iter().map(|e| e.event_id.clone()).collect();
        let zone = super::tools::scheduled::zone_of(&self.store, &scope.asker, self.schedules.timezone).await?;
        let situation = context::Situation {
            scope,
            polls: &polls,
            display_name: &persona.display_name,
            system_prompt: &persona.system_prompt,
            tools_line: prompt_line(),
            gated,
            now_ms: now_ms(),
            zone,
            budget: self.limits.history_chars,
            asked: &asked,
            rooms,
        };
        Ok(context::build(&situation, &history, presses, &parts))
    }

    /// Tells the room, once, that the persona cannot see pictures.
    async fn say_no_vision(&self, turn: i64, scope: &Scope) -> Result<(), Error> {
        let key = format!("told_no_vision:{}:{}", scope.room, scope.persona);
        if self.store.meta(&key).await?.is_some() {
            return Ok(());
        }
        let id = WriteId { turn, seq: NO_VISION_SEQ };
        match notices::post(&self.outbox, scope, id, strings::NO_VISION, true).await {
            Ok(()) => {}
            Err(PostError::Later(why)) => return Err(Error::Suspended(why)),
            Err(PostError::Failed(why)) => {
                tracing::warn!(room = %scope.room, why, "could not say the persona cannot see pictures")
            }
        }
        Ok(self.store.set_meta(&key, "1").await?)
    }
}

/// The media messages the turn is about, newest first: its own and what they reply to.
pub(super) fn about<'a>(history: &'a [StoredEvent], asked: &'a [StoredEvent]) -> Vec<&'a StoredEvent> {
    let mut wanted: Vec<&StoredEvent> = Vec::new();
    for e in asked.iter().rev() {
        let replied = e.relation().and_then(|r| r.reply_to().map(ToOwned::to_owned));
        let replied = replied.and_then(|to| history.iter().find(|h| h.event_id == to));
        for candidate in [Some(e), replied].into_iter().flatten() {
            if Kind::of(&candidate.event).is_some() && !wanted.iter().any(|w| w.event_id == candidate.event_id) {
                wanted.push(candidate);
            }
        }
    }
    wanted
}

/// The media the turn is about (see [`about`]), at most `images_per_turn` pictures (the
/// others named, with why); voice messages were heard before (`voice`).
async fn gather(
    media: &crate::media::Media,
    persona: &Persona,
    sees: bool,
    history: &[StoredEvent],
    asked: &[StoredEvent],
    known: Parts,
) -> HashMap<OwnedEventId, Part> {
    let mut parts = known;
    let mut pictures = 0;
    let wanted: Vec<&StoredEvent> =
        about(history, asked).into_iter().filter(|e| !parts.contains_key(&e.event_id)).collect();
    for e in wanted {
        let part = match Kind::of(&e.event) {
            Some(Kind::Image) if !sees => Part::Unread("you cannot see pictures".into()),
            Some(Kind::Image) if pictures >= media.limits.images_per_turn => {
                Part::Unread("more pictures than one turn takes; the member can ask about it again".into())
            }
            Some(Kind::Image) => {
                pictures += 1;
                media.part(&e.event, &persona.user_id).await
            }
            _ => media.part(&e.event, &persona.user_id).await,
        };
        parts.insert(e.event_id.clone(), part);
    }
    parts
}
