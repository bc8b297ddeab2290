//! Voice in: the voice messages a turn is about (its own, and those they reply to) made
//! words by the transcription endpoint (`[transcription]`), so the model reads what the
//! member said as `[voice message, 4 s] …`. The words are kept (`transcripts`), read by
//! later turns instead of the audio, and scrubbed with a redaction.
//!
//! Nothing is fetched or sent that a bound refuses: a message longer than
//! `transcription.max_seconds` or larger than `max_bytes` by what it states, or by what
//! its bytes turn out to hold (`speech::measure`: a sender can understate, and an Ogg
//! page's granule is the sender's word too), and seconds past the asker's
//! `budget.audio_seconds_per_day`. A message that holds more than it states, or more
//! bytes than its seconds can take, is refused as not what it says; one whose length
//! cannot be measured is refused; only what may still be heard is fetched at all. It is
//! charged the largest of what it states, holds, and what the endpoint says it heard, and
//! its words go into the prompt cut to what its seconds can say. Each refusal and failure is told to the member
//! once, in a notice of the turn's own (a resumed turn posts it under the same write id,
//! so never twice), and the turn goes on with the voice message named. A persona that
//! cannot listen (no `[transcription]`, or `transcription = false`) says so once per room
//! and hour.

use ruma::UserId;

use crate::budget::Budget;
use crate::clock::now_ms;
use crate::media::{self, Kind, Part};
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::outbox::WriteId;
use crate::personas::Persona;
use crate::speech::{self, Listening, Voice};
use crate::store::Store;
use crate::store::StoredEvent;
use crate::strings;
use crate::turn::context::Parts;
use crate::turn::conversation::about;
use crate::turn::notices::{self, PostError};
use crate::turn::{Error, Scope};

/// Where the voice notices go among the turn's writes: "cannot listen", then one per
/// voice message by its place.
const VOICE_SEQ: i64 = 4_100_000;

/// How often a room is told, at most, that the persona cannot listen.
const CANNOT_LISTEN_EVERY_MS: i64 = 3_600_000;

/// How much longer than its stated length a voice message may hold (a recorder rounds).
const STATED_SLACK_MS: u64 = 1_000;

/// Characters of a transcript a second of speech may take (fast speech is about 20).
const CHARS_PER_SECOND: u64 = 40;

/// A voice message's length and size (as stated, or as held).
#[derive(Debug, Clone, Copy)]
struct Clip {
    ms: u64,
    bytes: u64,
}

impl Clip {
    fn seconds(&self) -> u64 {
        self.ms.div_ceil(1000)
    }
}

/// `text` cut to what `max_seconds` of speech can say: a transcript longer than that is
/// not speech the endpoint heard (or it is one gone astray), and goes into the prompt cut.
fn cut_transcript(text: &str, max_seconds: u64) -> String {
    let most = usize::try_from(max_seconds.saturating_mul(CHARS_PER_SECOND)).unwrap_or(usize::MAX).max(200);
    crate::blocks::cut(text, most)
}

/// What became of one voice message: what the model reads, and what the member is told.
struct Heard {
    part: Part,
    told: Option<String>,
}

impl Heard {
    fn refused(why: String, told: String) -> Self {
        Self { part: Part::Unread(why), told: Some(told) }
    }
}

/// What hearing a turn's voice messages needs of the turn stage.
pub(in crate::turn) struct Hearing<'a> {
    pub store: &'a Store,
    pub outbox: &'a Outbox,
    pub metrics: &'a Metrics,
    pub budget: &'a Budget,
    pub media: &'a Option<crate::media::Media>,
    pub voice: &'a Voice,
}

impl Hearing<'_> {
    /// Makes words of the voice messages the turn is about that `parts` has none for.
    pub(in crate::turn) async fn listen(
        &self,
        turn: i64,
        scope: &Scope,
        persona: &Persona,
        history: &[StoredEvent],
        events: &[StoredEvent],
        parts: &mut Parts,
    ) -> Result<(), Error> {
        let voices = about(history, events).into_iter().filter(|e| Kind::of(&e.event) == Some(Kind::Audio));
        for (i, e) in (1..).zip(voices) {
            if parts.contains_key(&e.event_id) {
                continue;
            }
            let Some(listening) = self.voice.listening.as_ref().filter(|_| persona.listens) else {
                parts.insert(e.event_id.clone(), Part::Unread("you cannot listen to voice messages".into()));
                self.say_cannot_listen(turn, scope).await?;
                continue;
            };
            let heard = self.hear(listening, persona, scope, e).await?;
            if let Some(text) = &heard.told {
                self.tell_voice(WriteId { turn, seq: VOICE_SEQ + i }, scope, text).await?;
            }
            parts.insert(e.event_id.clone(), heard.part);
        }
        Ok(())
    }

    /// One voice message, within the bounds, made words (and kept). Its length is what its
    /// bytes hold (`speech::measure`), and what it is charged the largest of that, what it
    /// states and what the endpoint says it heard.
    async fn hear(
        &self,
        listening: &Listening,
        persona: &Persona,
        scope: &Scope,
        e: &StoredEvent,
    ) -> Result<Heard, Error> {
        let content = e.content();
        let stated = Clip {
            ms: content.pointer("/info/duration").and_then(serde_json::Value::as_u64).unwrap_or(0),
            bytes: content.pointer("/info/size").and_then(serde_json::Value::as_u64).unwrap_or(0),
        };
        let mime = crate::mime::or_octet_stream(
            content.pointer("/info/mimetype").and_then(serde_json::Value::as_str).unwrap_or("audio/ogg"),
        );
        if let Some(refused) = self.refuse(listening, &scope.asker, stated).await? {
            return Ok(refused);
        }
        // A second, coarse guard: no more bytes than its stated seconds (when it states
        // them) or the seconds it may still be heard for can take.
        if stated.ms > 0 && stated.bytes > speech::most_bytes(mime, stated.seconds()) {
            let held = format!("it is {} KiB, more than that takes", stated.bytes.div_ceil(1024));
            return Ok(self.not_as_stated(stated, held));
        }
        let allowed = self.seconds_left(listening, &scope.asker).await?;
        let cap = usize::try_from(speech::most_bytes(mime, allowed)).unwrap_or(usize::MAX).min(listening.max_bytes);
        let Some(media) = &self.media else {
            return Ok(self.failed(speech::Error::Failed("media cannot be fetched here".into())));
        };
        let bytes = match media.audio(&e.event, &persona.user_id, cap).await {
            Ok(bytes) => bytes,
            Err(why) => {
                tracing::info!(room = %scope.room, event = %e.event_id, why, "a voice message could not be fetched");
                Metrics::inc(&self.metrics.voice_failed);
                let told = format!("🎤 I couldn't fetch your voice message ({why}). Please send it again, or type it.");
                return Ok(Heard::refused(format!("it could not be fetched ({why})"), told));
            }
        };
        // What the bytes hold, not what the sender said.
        let measured_ms = match speech::measure(&bytes) {
            Ok(ms) => ms,
            Err(why) => {
                tracing::info!(room = %scope.room, event = %e.event_id, why, "a voice message could not be measured");
                Metrics::inc(&self.metrics.voice_refused);
                return Ok(Heard::refused(
                    format!("it could not be measured ({why})"),
                    strings::voice_unmeasurable(&why),
                ));
            }
        };
        if stated.ms > 0 && measured_ms > stated.ms + (stated.ms / 10).max(STATED_SLACK_MS) {
            let held = format!("it holds {} s", measured_ms.div_ceil(1000));
            return Ok(self.not_as_stated(stated, held));
        }
        let held = Clip { ms: measured_ms.max(stated.ms), bytes: bytes.len() as u64 };
        if let Some(refused) = self.refuse(listening, &scope.asker, held).await? {
            return Ok(refused);
        }
        let name = crate::invisible::strip_deceptive(&media::name(content)).into_owned();
        match listening.endpoint.transcribe(bytes, &name, mime).await {
            Ok(heard) => {
                // The endpoint's own figure, when larger, is what it was paid for.
                let reported = heard.seconds.map_or(0, |s| s.ceil() as u64);
                let seconds = held.seconds().max(reported).max(1);
                let text = cut_transcript(&heard.text, listening.max_seconds);
                self.store.record_transcript(&scope.room, &e.event_id, &scope.asker, &text, seconds, now_ms()).await?;
                Metrics::inc(&self.metrics.voice_transcribed);
                Metrics::add(&self.metrics.voice_seconds, seconds);
                tracing::info!(room = %scope.room, event = %e.event_id, seconds, "a voice message was transcribed");
                Ok(Heard { part: Part::Spoken { text, seconds }, told: None })
            }
            Err(e) => Ok(self.failed(e)),
        }
    }

    /// The seconds `asker` may still be heard for: `max_seconds`, or less when their day's
    /// budget has less left.
    async fn seconds_left(&self, listening: &Listening, asker: &UserId) -> Result<u64, Error> {
        if listening.seconds_per_day == 0 || self.budget.exempt(asker) {
            return Ok(listening.max_seconds);
        }
        let used = self.store.audio_seconds_today(asker, now_ms()).await?;
        Ok(listening.seconds_per_day.saturating_sub(used).min(listening.max_seconds))
    }

    /// A voice message that is not what it says it is.
    fn not_as_stated(&self, stated: Clip, held: String) -> Heard {
        Metrics::inc(&self.metrics.voice_refused);
        let why = format!("it is not what it says ({held})");
        Heard::refused(why, strings::voice_not_as_stated(stated.seconds(), &held))
    }

    /// A refusal by `listening`'s bounds or the asker's day, if one applies to `clip`.
    async fn refuse(&self, listening: &Listening, asker: &UserId, clip: Clip) -> Result<Option<Heard>, Error> {
        let (seconds, max) = (clip.seconds(), listening.max_seconds);
        let refused = if clip.ms > max * 1000 {
            Heard::refused(format!("longer than the {max} s transcribed"), strings::voice_too_long(seconds, max))
        } else if clip.bytes > listening.max_bytes as u64 {
            let why = format!("larger than the {} bytes transcribed", listening.max_bytes);
            Heard::refused(why, strings::voice_too_large(clip.bytes, listening.max_bytes))
        } else if listening.seconds_per_day > 0
            && !self.budget.exempt(asker)
            && self.store.audio_seconds_today(asker, now_ms()).await? + seconds.max(1) > listening.seconds_per_day
        {
            let why = "over the asker's daily seconds of voice messages".to_owned();
            Heard::refused(why, strings::voice_budget_spent(listening.seconds_per_day))
        } else {
            return Ok(None);
        };
        Metrics::inc(&self.metrics.voice_refused);
        Ok(Some(refused))
    }

    /// The endpoint failed: misconfiguration is the admin's (logged as an error), anything
    /// else an outage.
    fn failed(&self, e: speech::Error) -> Heard {
        Metrics::inc(&self.metrics.voice_failed);
        match &e {
            speech::Error::Misconfigured(status, body) => {
                let body = crate::blocks::cut(body, 200);
                tracing::error!(
                    status,
                    body,
                    "the transcription endpoint refused: check transcription.base_url and its key"
                );
                Heard::refused(format!("it could not be transcribed ({e})"), strings::VOICE_MISCONFIGURED.to_owned())
            }
            speech::Error::Failed(why) => {
                tracing::warn!(why, "a voice message could not be transcribed");
                Heard::refused(format!("it could not be transcribed ({why})"), strings::VOICE_FAILED.to_owned())
            }
        }
    }

    /// Tells the room that the persona cannot listen, at most once an hour.
    async fn say_cannot_listen(&self, turn: i64, scope: &Scope) -> Result<(), Error> {
        let key = format!("told_cannot_listen:{}:{}", scope.room, scope.persona);
        let now = now_ms();
        let told = self.store.meta(&key).await?.and_then(|v| v.parse::<i64>().ok());
        if told.is_some_and(|at| now - at < CANNOT_LISTEN_EVERY_MS) {
            return Ok(());
        }
        self.tell_voice(WriteId { turn, seq: VOICE_SEQ }, scope, strings::CANNOT_LISTEN).await?;
        Ok(self.store.set_meta(&key, &now.to_string()).await?)
    }

    async fn tell_voice(&self, id: WriteId, scope: &Scope, text: &str) -> Result<(), Error> {
        match notices::post(self.outbox, scope, id, text, true).await {
            Ok(()) => Ok(()),
            Err(PostError::Later(why)) => Err(Error::Suspended(why)),
            Err(PostError::Failed(why)) => {
                tracing::warn!(room = %scope.room, why, "could not tell the member about their voice message");
                Ok(())
            }
        }
    }
}
