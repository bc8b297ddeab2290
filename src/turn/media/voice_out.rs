//! Voice out: a persona with `voice_replies = true`, asked by a voice message, follows its
//! text answer with a voice message of it, spoken by the speech endpoint (`[speech]`).
//! It goes as Element's own do: `m.audio` marked `org.matrix.msc3245.voice`, with its
//! length and waveform (`speech::shape`), uploaded once under the turn's upload key
//! (encrypted in an encrypted room) and posted as a write of the turn's own, so a resumed
//! turn neither uploads nor posts it twice.
//!
//! The text answer is the answer: a voice that cannot be made (the endpoint down, the
//! upload refused) is logged and counted, and the member still has the text.

use crate::media::{Kind, Upload, UploadError};
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::outbox::{self, Write, WriteId};
use crate::personas::Persona;
use crate::render::{self, Info, Source};
use crate::speech::{self, Speaking};
use crate::store::Store;
use crate::store::{StoredEvent, TurnRecord, UploadKey};
use crate::turn::close::{Answer, Closer};
use crate::turn::{Error, Outcome, Scope};

/// The spoken answer's upload number (apart from any tool call's) and write number.
const VOICE_NTH: u32 = 900_000;
const VOICE_SEQ: i64 = 4_200_000;

/// Characters of an answer spoken at most (OpenAI's speech API takes 4096).
const MAX_SPOKEN_CHARS: usize = 4_000;

/// What speaking an answer needs of the turn stage.
pub(in crate::turn) struct Speaker<'a> {
    pub store: &'a Store,
    pub outbox: &'a Outbox,
    pub metrics: &'a Metrics,
    pub media: &'a Option<crate::media::Media>,
    pub voice: &'a crate::speech::Voice,
}

impl Speaker<'_> {
    /// Closes a turn the model answered, then speaks the answer if it should be.
    pub(in crate::turn) async fn answered(
        &self,
        close: &Closer<'_>,
        answer: Answer,
        persona: &Persona,
        events: &[StoredEvent],
    ) -> Result<(Outcome, TurnRecord), Error> {
        let text = answer.done.text.clone();
        let closed = close.answered(answer).await?;
        if let (Outcome::Answered, Some(text), Some(speaking)) = (&closed.0, text, &self.voice.speaking)
            && persona.voice_replies
            && self.spoke(close.scope, events).await?
        {
            self.speak(close.turn, close.scope, speaking, &text).await?;
        }
        Ok(closed)
    }

    /// Whether the member spoke: one of the turn's own messages is a voice message heard.
    async fn spoke(&self, scope: &Scope, events: &[StoredEvent]) -> Result<bool, Error> {
        let voices: Vec<&ruma::EventId> =
            events.iter().filter(|e| Kind::of(&e.event) == Some(Kind::Audio)).map(|e| &*e.event_id).collect();
        Ok(!voices.is_empty() && !self.store.transcripts(&scope.room, &voices).await?.is_empty())
    }

    /// Speaks `text` and posts it as a voice message.
    async fn speak(&self, turn: i64, scope: &Scope, speaking: &Speaking, text: &str) -> Result<(), Error> {
        let Some(media) = &self.media else { return Ok(()) };
        let fail = |why: String| {
            Metrics::inc(&self.metrics.voice_failed);
            tracing::warn!(turn, room = %scope.room, why, "the answer could not be spoken; the text stands");
            Ok(())
        };
        let bytes = match speaking.endpoint.speak(&speakable(text), &speaking.voice, &speaking.format).await {
            Ok(bytes) if !bytes.is_empty() => bytes,
            Ok(_) => return fail("the speech endpoint gave no audio".into()),
            Err(speech::Error::Misconfigured(status, _)) => {
                return fail(format!("the speech endpoint refused (HTTP {status}): check speech.base_url and its key"));
            }
            Err(speech::Error::Failed(why)) => return fail(why),
        };
        let encrypt = match self.outbox.encrypted(&scope.room, &scope.persona).await {
            Ok(encrypted) => encrypted,
            Err(outbox::Error::Unavailable(why)) => return Err(Error::Suspended(why)),
            Err(e) => return fail(e.to_string()),
        };
        let (mimetype, name) = match speaking.format.as_str() {
            "wav" => ("audio/wav", "answer.wav"),
            _ => ("audio/ogg", "answer.ogg"),
        };
        let key = UploadKey { turn, nth: VOICE_NTH, idx: 0 };
        let upload = Upload { key, bytes: &bytes, mimetype, name, encrypt };
        let uploaded = match media.upload(self.store, &scope.persona, upload).await {
            Ok(uploaded) => uploaded,
            Err(UploadError::Unavailable(why) | UploadError::Store(why)) => return Err(Error::Suspended(why)),
            Err(e) => return fail(e.to_string()),
        };
        let shape = speech::shape(&bytes);
        let source = uploaded.file.as_ref().map_or(Source::Url(&uploaded.mxc), Source::File);
        let info = Info { mimetype: Some(mimetype), size: Some(bytes.len() as u64), dimensions: None };
        let (duration_ms, waveform) = (shape.duration_ms, shape.waveform.as_slice());
        let content = render::voice_message("Voice answer", source, info, duration_ms, waveform, scope.relation());
        let write = Write { id: WriteId { turn, seq: VOICE_SEQ }, room: &scope.room, persona: &scope.persona };
        // Its write id says what it is: a resumed turn's speech may differ by a byte.
        match self.outbox.send_live(&write, &content, scope.thread.as_deref()).await {
            Ok(_) => {
                Metrics::inc(&self.metrics.voice_replies);
                Ok(())
            }
            Err(outbox::Error::Unavailable(why)) => Err(Error::Suspended(why)),
            Err(outbox::Error::Store(e)) => Err(e.into()),
            Err(e) => fail(e.to_string()),
        }
    }
}

/// What is read aloud of an answer: its words, without Markdown's marks or links' URLs,
/// and at most [`MAX_SPOKEN_CHARS`] (cut after a sentence where one ends).
fn speakable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("](") {
        let close = rest[open..].find(')').map_or(rest.len(), |c| open + c + 1);
        out.push_str(&rest[..open]);
        rest = &rest[close..];
    }
    out.push_str(rest);
    let out: String = out.chars().filter(|c| !matches!(c, '*' | '_' | '`' | '#' | '[' | '>' | '|')).collect();
    let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.chars().count() <= MAX_SPOKEN_CHARS {
        return out;
    }
    let cut: String = out.chars().take(MAX_SPOKEN_CHARS).collect();
    match cut.rfind(['.', '!', '?']) {
        Some(end) if end > MAX_SPOKEN_CHARS / 2 => cut[..=end].to_owned(),
        _ => cut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_spoken_without_its_markdown_or_urls_and_cut_after_a_sentence() {
        assert_eq!(
            speakable("## Lisbon\n**Warm** today: see [the forecast](https://x.example/f) or `ipma`."),
            "Lisbon Warm today: see the forecast or ipma."
        );
        let long = "It is warm. ".repeat(500);
        let spoken = speakable(&long);
        assert!(spoken.len() <= MAX_SPOKEN_CHARS && spoken.ends_with("warm."), "{}", spoken.len());
    }
}
