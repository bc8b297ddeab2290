//! Record, then act: every model reply of a turn is stored before its text is shown and
//! its tools run, and a resumed turn replays the stored replies in order instead of asking
//! the model again. Its writes then reuse their write ids: those that landed are found in
//! the outbox, and the turn continues from the first that did not. Only past the record
//! is the model asked for more.
//!
//! Each reply's text goes out here (`live`), before its tools run, so the conversation
//! reads in order: a reply streamed live while it is written, then finished. What goes
//! out is what the review (`review`) lets a member read: a replayed reply is judged again,
//! the same way.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Notify;

use super::answer::review::Verdict;
use super::live::Live;
use super::notices::PostError;
use crate::agent::{self, Complete, LiveText, Message, Reply, ToolSpec};
use crate::metrics::Metrics;
use crate::store::{self, Store, TurnRow};

/// The model as a resumable turn sees it.
pub struct Recorded<'a, L> {
    llm: &'a L,
    store: &'a Store,
    live: &'a Live<'a>,
    metrics: &'a Metrics,
    review: super::answer::review::Review,
    turn: i64,
    replay: Mutex<VecDeque<Reply>>,
    /// Rounds handed out so far (recorded or new).
    round: AtomicU32,
    replayed: AtomicU32,
    /// Whether a call was asked for by its arguments in this run (`keep`): once a turn.
    filled: std::sync::atomic::AtomicBool,
    /// Why a reply's text could not be posted for good, if it could not.
    pub failed: Mutex<Option<String>>,
}

impl<'a, L> Recorded<'a, L> {
    /// Loads what `turn` recorded before: only a resumed turn can have (a new one is not
    /// read for it).
    pub async fn load(
        llm: &'a L,
        store: &'a Store,
        metrics: &'a Metrics,
        live: &'a Live<'a>,
        turn: &TurnRow,
    ) -> Result<Self, store::Error> {
        let mut replay = VecDeque::new();
        if turn.resumed {
            for text in store.replies(turn.id).await? {
                replay.push_back(serde_json::from_str(&text)?);
            }
        }
        let turn = turn.id;
        Ok(Self {
            llm,
            store,
            live,
            metrics,
            review: super::answer::review::Review::new(live.scope().is_dm),
            turn,
            replay: Mutex::new(replay),
            round: AtomicU32::new(0),
            replayed: AtomicU32::new(0),
            filled: std::sync::atomic::AtomicBool::new(false),
            failed: Mutex::new(None),
        })
    }

    /// How many replies came from the record rather than the model.
    pub fn replayed(&self) -> u32 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// Judges `reply` (`review`) and puts out what a member may read of it: its text
    /// cleaned, or (sent back to the model) nothing yet, or one honest sentence.
    async fn deliver(
        &self,
        round: u32,
        reply: &mut Reply,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<(), agent::Error> {
        // A lasting call the model wrote as text and nobody asked for is never run.
        let posted: Vec<&agent::ToolCall> = if super::answer::review::posted(messages) {
            messages
                .iter()
                .flat_map(|m| if let Message::Assistant { tool_calls, .. } = m { &tool_calls[..] } else { &[] })
                .collect()
        } else {
            Vec::new()
        };
        let unasked = super::answer::unasked::take_out(reply, super::answer::review::asked(messages), &posted);
        if let Some(u) = &unasked {
            tracing::info!(
                turn = self.turn,
                round,
                tool = u.tool,
                does = u.does,
                "a call written as text that nobody asked for was not run"
            );
            self.metrics.tool_call(&u.tool, "unasked");
        }
        let verdict = match unasked {
            Some(u) if reply.tool_calls.is_empty() => {
                // What the model wrote stays its history, before the correction.
                reply.text.get_or_insert(u.call.clone());
                self.review.unasked(&u, messages)
            }
            _ => self.review.judge(reply, messages, tools),
        };
        match verdict {
            Verdict::Show(_) if reply.written > 0 || reply.filled => {
                // The words around a call written as text narrate it ("Here's the payload
                // you need:"), and a filled-in call's promised it: no answer, neither posted
                // nor shown to the model again. What showed live is the next reply's to
                // finish (or is withdrawn).
                self.live.carry_over(round);
                reply.text = None;
            }
            Verdict::Show(text) => {
                self.show(round, &text, false).await?;
                reply.text = (!text.is_empty()).then_some(text);
            }
            Verdict::Correct(correction) => {
                tracing::info!(turn = self.turn, round, correction, "an answer was sent back to the model");
                Metrics::inc(&self.metrics.answer_corrections);
                // What this reply showed live is the next one's to finish.
                self.live.carry_over(round);
                reply.correction = Some(correction);
            }
            Verdict::Replace(sentence) => {
                tracing::warn!(turn = self.turn, round, "the model gave no answer fit to post; the member is told");
                self.show(round, &sentence, false).await?;
                reply.text = Some(sentence);
            }
        }
        Ok(())
    }

    /// `reply`, or if it promised what the member asked for and only a tool does, the call
    /// that keeps it, filled in by the model (`keep`), once a turn. Made before the reply
    /// is recorded, so a resumed turn replays the call.
    async fn kept(
        &self,
        round: u32,
        reply: Reply,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<Reply, agent::Error>
    where
        L: Complete + Sync,
    {
        let Some(fill) = super::answer::keep::fill_for(&reply, messages, tools) else { return Ok(reply) };
        if self.filled.swap(true, Ordering::Relaxed) {
            return Ok(reply);
        }
        let mut asked = messages.to_vec();
        asked.push(Message::Assistant { text: reply.text.clone(), tool_calls: Vec::new() });
        let Some(filled) = self.llm.fill(&asked, &fill).await? else { return Ok(reply) };
        tracing::info!(
            turn = self.turn,
            round,
            tool = fill.tool,
            filled = filled.text.is_some(),
            "asked the model for the call its answer promised"
        );
        if filled.text.is_some() {
            Metrics::inc(&self.metrics.llm_filled_calls);
        }
        Ok(super::answer::keep::keep(reply, round, &fill, &filled))
    }

    /// Puts a reply's text out; a homeserver that is down suspends the turn.
    async fn show(&self, round: u32, text: &str, cut: bool) -> Result<(), agent::Error> {
        match self.live.finish(round, text, cut).await {
            Ok(()) => Ok(()),
            Err(PostError::Later(why)) => Err(agent::Error::Suspended(why)),
            Err(PostError::Failed(why)) => {
                tracing::warn!(turn = self.turn, error = %why, "could not post the answer");
                *self.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
                Ok(())
            }
        }
    }
}

impl<L: Complete + Sync> Complete for Recorded<'_, L> {
    async fn complete(&self, messages: &[Message], tools: &[ToolSpec], live: &LiveText) -> Result<Reply, agent::Error> {
        let round = self.round.fetch_add(1, Ordering::Relaxed) + 1;
        let recorded = self.replay.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
        if let Some(mut reply) = recorded {
            self.replayed.fetch_add(1, Ordering::Relaxed);
            if reply.filled {
                self.filled.store(true, Ordering::Relaxed);
            }
            self.deliver(round, &mut reply, messages, tools).await?;
            return Ok(reply);
        }
        let done = Notify::new();
        let (result, ()) = tokio::join!(
            async {
                let result = self.llm.complete(messages, tools, live).await;
                done.notify_one();
                result
            },
            self.live.follow(round, live.subscribe(), &done),
        );
        match result {
            Ok(reply) => {
                // Boxed: asking for a call's arguments is rare, and its future large.
                let mut reply = Box::pin(self.kept(round, reply, messages, tools)).await?;
                let text = serde_json::to_string(&reply).map_err(|e| agent::Error::Suspended(e.to_string()))?;
                self.store
                    .record_reply(self.turn, round, &text)
                    .await
                    .map_err(|e| agent::Error::Suspended(format!("could not record the model's reply: {e}")))?;
                Metrics::add(&self.metrics.llm_written_calls, u64::from(reply.written));
                self.deliver(round, &mut reply, messages, tools).await?;
                Ok(reply)
            }
            Err(agent::Error::Cut(so_far, why)) => {
                // Never leave a message live: end it with the text so far and a note.
                self.show(round, &so_far, true).await?;
                Err(agent::Error::Cut(so_far, why))
            }
            Err(e) => Err(e),
        }
    }
}

/// Counts the model calls made (not those `replayed` from the record).
pub(super) fn count_llm(
    metrics: &Metrics,
    result: &Result<agent::Outcome, agent::Error>,
    conversation: &[agent::Message],
    replayed: u32,
) {
    let answered = conversation.iter().filter(|m| matches!(m, agent::Message::Assistant { .. })).count() as u64;
    let answered = answered.saturating_sub(u64::from(replayed));
    match result {
        Ok(outcome) => {
            Metrics::add(&metrics.llm_requests, u64::from(outcome.rounds.saturating_sub(replayed)));
            Metrics::add(&metrics.prompt_tokens, outcome.usage.prompt);
            Metrics::add(&metrics.cached_prompt_tokens, outcome.usage.cached);
            Metrics::add(&metrics.completion_tokens, outcome.usage.completion);
        }
        Err(agent::Error::NotAllowed(_) | agent::Error::Suspended(_)) => Metrics::add(&metrics.llm_requests, answered),
        Err(_) => {
            Metrics::add(&metrics.llm_requests, answered + 1);
            Metrics::inc(&metrics.llm_failures);
        }
    }
}
