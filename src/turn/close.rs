//! How a turn's loop is told to the person: the model's final text (split across messages
//! when one event cannot hold it), or richbot's own notice when the LLM failed, the
//! endpoint is misconfigured, the round limit or the deadline was hit. A write that
//! cannot be made now suspends the turn ([`Error::Suspended`]); it is told on resume.

use super::notices::{self, PostError};
use super::{Error, Outcome, Scope};
use crate::agent::{self, Llm};
use crate::outbox::{Outbox, WriteId};
use crate::store::TurnRecord;
use crate::strings;

/// How the model's loop ended, for closing the turn with it.
pub struct Answer {
    /// The write the answer (or what is told instead) takes.
    pub next: WriteId,
    pub done: agent::Outcome,
    /// Why the answer was not put out as it came (none: it was).
    pub failed: Option<String>,
    /// Whether the turn's tools posted or edited anything.
    pub wrote: bool,
}

/// What closing a turn needs.
pub(super) struct Closer<'a> {
    pub outbox: &'a Outbox,
    pub llm: &'a Llm,
    pub scope: &'a Scope,
    pub turn: i64,
}

impl Closer<'_> {
    /// Posts richbot's own word as an `m.notice`. Only a homeserver that is down stops it
    /// (suspending the turn); any other failure is logged.
    pub async fn tell(&self, id: WriteId, text: &str) -> Result<(), Error> {
        match notices::post(self.outbox, self.scope, id, text, true).await {
            Ok(()) => Ok(()),
            Err(PostError::Later(why)) => Err(Error::Suspended(why)),
            Err(PostError::Failed(why)) => {
                tracing::warn!(turn = self.turn, error = %why, "could not post a notice");
                Ok(())
            }
        }
    }

    /// The loop ended with the model's answer (already put out as it came, unless
    /// `failed` says why not) or the round limit.
    pub async fn answered(&self, answer: Answer) -> Result<(Outcome, TurnRecord), Error> {
        let Answer { next, done, failed, wrote } = answer;
        let record = TurnRecord {
            outcome: String::new(),
            rounds: done.rounds,
            prompt_tokens: done.usage.prompt,
            completion_tokens: done.usage.completion,
            cached_tokens: done.usage.cached,
        };
        if let Some(why) = &done.stopped {
            tracing::warn!(turn = self.turn, room = %self.scope.room, cause = %why, rounds = done.rounds, "the model misbehaved; the turn ended with what it had");
            if !wrote {
                let told = match why {
                    agent::Misbehaved::CutOff => strings::MODEL_CUT_OFF,
                    agent::Misbehaved::Repeating(_) => strings::MODEL_REPEATING,
                };
                self.tell(next, told).await?;
            }
            return Ok((Outcome::Unfinished(why.to_string()), record));
        }
        let outcome = match done.text.as_deref().map(str::trim) {
            Some(text) if !strings::is_no_reply(text) && !text.is_empty() => match failed {
                None => Outcome::Answered,
                Some(reason) => {
                    self.tell(next, strings::POST_FAILED).await?;
                    Outcome::PostFailed(reason)
                }
            },
            None if done.exhausted => {
                self.tell(next, strings::TOO_MANY_ROUNDS).await?;
                Outcome::MaxRounds
            }
            // Told it was cut off (and not out of rounds, said above), the model gave up without a word: not a choice to stay
            // silent, so the member hears why there is no answer.
            _ if done.cut && !wrote && failed.is_none() => {
                tracing::warn!(turn = self.turn, room = %self.scope.room, "the model gave no answer after its cut call");
                self.tell(next, strings::MODEL_CUT_OFF).await?;
                Outcome::Unfinished("the model gave no answer after its tool call was cut off".into())
            }
            _ => Outcome::NoReply,
        };
        Ok((outcome, record))
    }

    /// The LLM failed for good: a mistake in the configuration (the endpoint refuses the
    /// key, or has no such path) is the admin's to fix, told as such; anything else is an
    /// outage the person may retry.
    pub async fn llm_failed(&self, next: WriteId, e: agent::Error) -> Result<Outcome, Error> {
        if let agent::Error::Cut(so_far, why) = &e
            && !so_far.trim().is_empty()
        {
            // The live message already ends with the text so far and a note.
            tracing::warn!(turn = self.turn, why, "the streamed answer stopped part-way");
            return Ok(Outcome::LlmFailed(e.to_string()));
        }
        // A chat request refused for its key or path says so itself; anything else is
        // told apart by probing the endpoint.
        let probed = match &e {
            agent::Error::Refused(status @ (400 | 422), message) => {
                Err(agent::Probe::Request(*status, message.clone()))
            }
            agent::Error::Refused(status, _) => Err(agent::Probe::Chat(*status)),
            _ => self.llm.probe().await,
        };
        match probed {
            Err(probe) if probe.is_config_error() => {
                let fix = probe.explain(self.llm.base_url(), self.llm.has_key());
                tracing::error!(turn = self.turn, error = %e, fix, "the LLM endpoint is misconfigured");
                self.tell(next, strings::MISCONFIGURED).await?;
                Ok(Outcome::Misconfigured(fix))
            }
            _ => {
                tracing::error!(turn = self.turn, room = %self.scope.room, error = %e, "the LLM failed; telling the user");
                self.tell(next, strings::LLM_FAILED).await?;
                Ok(Outcome::LlmFailed(e.to_string()))
            }
        }
    }

    /// The turn ran past its deadline.
    pub async fn deadline(&self, next: WriteId) -> Result<Outcome, Error> {
        tracing::warn!(turn = self.turn, room = %self.scope.room, "the turn ran past its deadline");
        self.tell(next, strings::DEADLINE).await?;
        Ok(Outcome::Deadline)
    }
}
