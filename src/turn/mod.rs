//! The turn stage: one LLM turn for one room, persona and asker.
//!
//! Lifecycle of a turn (the room stage has already claimed its events in the store):
//! 1. The [`Scope`] is settled: room, persona, asker, whether the room is a DM, and the
//!    thread the turn answers in (the last triggering event's).
//! 2. The conversation is built (`context`, pure) from the room's stored history; the
//!    tools are offered with the rooms the asker may name (`tools::tool_specs`).
//! 3. The agent loop runs with the persona's typing notice on; each tool call goes through
//!    the [`runner`](runner::Runner): `plan`, the sandbox (`targets`), rendering, and the
//!    outbox, which gives every write a transaction id fixed before its first attempt.
//! 4. The final text is posted unless it is `[no reply]`; the LLM failing or the round
//!    limit is told to the person. The turn is finished with its [`Outcome`] and usage,
//!    which marks its events processed in the same transaction.
//!
//! A crash anywhere leaves the turn `running`; the room stage resumes it with the same id,
//! so its writes reuse their transaction ids and nothing is posted twice.

pub mod context;
mod outcome;
mod runner;
mod targets;

use std::sync::Arc;

use ruma::{OwnedEventId, OwnedRoomId, OwnedUserId};

use crate::agent::{self, Llm, run_loop};
use crate::blocks::WriterKey;
use crate::clock::now_ms;
use crate::metrics::Metrics;
use crate::outbox::{self, Outbox, Write, WriteId};
use crate::personas::Personas;
use crate::render;
use crate::store::{self, Store, StoredEvent, TurnRecord, TurnRow};
use crate::strings;
use crate::tools::{RoomChoices, prompt_line, tool_specs};

pub use context::Press;
pub use outcome::{Outcome, UnknownOutcome};

/// Where a turn happens and for whom: what every part of the turn is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub room: OwnedRoomId,
    pub persona: OwnedUserId,
    pub asker: OwnedUserId,
    /// The room has exactly the persona and one other member.
    pub is_dm: bool,
    /// The thread the turn answers in: new messages go there unless the model says otherwise.
    pub thread: Option<OwnedEventId>,
}

/// How a turn is run, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The content key rich payloads are written under.
    pub key: WriterKey,
    /// Characters of room history in the prompt at most.
    pub history_chars: usize,
    /// Model rounds per turn at most.
    pub max_rounds: u32,
}

/// Runs turns. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Turns {
    store: Store,
    llm: Llm,
    outbox: Outbox,
    personas: Personas,
    metrics: Arc<Metrics>,
    limits: Limits,
}

impl Turns {
    pub fn new(
        store: Store,
        llm: Llm,
        outbox: Outbox,
        personas: Personas,
        metrics: Arc<Metrics>,
        limits: Limits,
    ) -> Self {
        Self { store, llm, outbox, personas, metrics, limits }
    }

    /// Runs `turn` (answering `events`, with the button `presses` among them) to the end
    /// and records it. An `Err` is a store failure: the turn stays `running`, to be resumed.
    pub async fn run(
        &self,
        turn: &TurnRow,
        events: &[StoredEvent],
        presses: &[Press],
    ) -> Result<Outcome, store::Error> {
        let Some(persona) = self.personas.get(&turn.persona) else {
            return self.finish(turn, Outcome::PersonaRemoved, TurnRecord::default()).await;
        };
        let last_seq = events.iter().map(|e| e.seq).max().unwrap_or(i64::MAX);
        let joined = self.store.joined_members(&turn.room_id).await?;
        let scope = Scope {
            room: turn.room_id.clone(),
            persona: turn.persona.clone(),
            asker: turn.asker.clone(),
            is_dm: joined.len() == 2,
            thread: events.last().and_then(StoredEvent::relation).and_then(|r| r.thread_root().map(ToOwned::to_owned)),
        };
        let history = self.store.history(&scope.room, last_seq, 200).await?;
        let situation = context::Situation {
            scope: &scope,
            display_name: &persona.display_name,
            system_prompt: &persona.system_prompt,
            tools_line: prompt_line(),
            now_ms: now_ms(),
            budget: self.limits.history_chars,
        };
        let messages = context::build(&situation, &history, presses);
        let tools = tool_specs(&self.room_choices(&scope).await?, self.outbox.interval_ms());

        let typing = self.outbox.typing(&scope.room, &scope.persona);
        let mut runner =
            runner::Runner::new(&self.store, &self.outbox, &self.metrics, self.limits.key, &scope, turn.id);
        let (result, conversation) = run_loop(&self.llm, messages, &tools, &mut runner, self.limits.max_rounds).await;
        let next = runner.next_write();
        self.count_llm(&result, &conversation);
        typing.stop().await;

        let say = |text: &'static str| self.post_text(&scope, next, text);
        let (outcome, record) = match result {
            Ok(done) => {
                let record = TurnRecord {
                    outcome: String::new(),
                    rounds: done.rounds,
                    prompt_tokens: done.usage.prompt,
                    completion_tokens: done.usage.completion,
                };
                let outcome = match done.text.as_deref().map(str::trim) {
                    Some(text) if text != strings::NO_REPLY && !text.is_empty() => {
                        match self.post_text(&scope, next, text).await {
                            Ok(()) => Outcome::Answered,
                            Err(reason) => {
                                tracing::warn!(turn = turn.id, error = %reason, "could not post the answer");
                                Outcome::PostFailed(reason)
                            }
                        }
                    }
                    None if done.exhausted => {
                        if let Err(reason) = say(strings::TOO_MANY_ROUNDS).await {
                            tracing::warn!(turn = turn.id, error = %reason, "could not say the round limit was hit");
                        }
                        Outcome::MaxRounds
                    }
                    _ => Outcome::NoReply,
                };
                (outcome, record)
            }
            Err(e) => {
                tracing::error!(turn = turn.id, room = %scope.room, error = %e, "the LLM failed; telling the user");
                if let Err(reason) = say(strings::LLM_FAILED).await {
                    tracing::warn!(turn = turn.id, error = %reason, "could not say the LLM failed");
                }
                (Outcome::LlmFailed(e.to_string()), TurnRecord::default())
            }
        };
        self.finish(turn, outcome, record).await
    }

    /// Records the end of a turn (its events become processed in the same transaction).
    pub async fn finish(&self, turn: &TurnRow, outcome: Outcome, record: TurnRecord) -> Result<Outcome, store::Error> {
        tracing::info!(turn = turn.id, room = %turn.room_id, %outcome, rounds = record.rounds, "turn finished");
        self.metrics.turn(outcome.kind());
        let record = TurnRecord { outcome: outcome.to_string(), ..record };
        self.store.finish_turn(turn.id, &record, now_ms()).await?;
        Ok(outcome)
    }

    /// The other rooms the asker may name: those both share, by name.
    async fn room_choices(&self, scope: &Scope) -> Result<RoomChoices, store::Error> {
        let mut choices = RoomChoices { in_dm: scope.is_dm, shared: Vec::new() };
        for room in self.store.shared_rooms(&scope.persona, &scope.asker).await? {
            if room != scope.room {
                let name = self.store.room_name(&room).await?.unwrap_or_else(|| "unnamed room".to_owned());
                choices.shared.push((room, name));
            }
        }
        Ok(choices)
    }

    fn count_llm(&self, result: &Result<agent::Outcome, agent::Error>, conversation: &[agent::Message]) {
        let answered = conversation.iter().filter(|m| matches!(m, agent::Message::Assistant { .. })).count() as u64;
        match result {
            Ok(outcome) => {
                Metrics::add(&self.metrics.llm_requests, u64::from(outcome.rounds));
                Metrics::add(&self.metrics.prompt_tokens, outcome.usage.prompt);
                Metrics::add(&self.metrics.completion_tokens, outcome.usage.completion);
            }
            Err(_) => {
                Metrics::add(&self.metrics.llm_requests, answered + 1);
                Metrics::inc(&self.metrics.llm_failures);
            }
        }
    }

    /// Posts `text` (CommonMark) as the turn's write `id`, in the turn's thread. The error
    /// says why, in words for the log and the turn's record.
    async fn post_text(&self, scope: &Scope, id: WriteId, text: &str) -> Result<(), String> {
        let thread = scope.thread.as_deref();
        let content = render::text(text, thread).map_err(|e| format!("the answer cannot be sent: {e}"))?;
        let write = Write { id, room: &scope.room, persona: &scope.persona };
        self.outbox.send(&write, &content, thread).await.map(drop).map_err(|e| match e {
            outbox::Error::Store(e) => format!("store: {e}"),
            e => e.to_string(),
        })
    }
}
