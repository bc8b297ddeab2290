//! Turns: what happens to a room's events once they are in the inbox.
//!
//! Lifecycle of a room's batch (one room at a time, see `scheduler.rs`):
//! 1. A turn left `running` by a crash is resumed first, with the same id and events, so
//!    its writes reuse their transaction ids (`post.rs`) and nothing is posted twice.
//! 2. The room's pending events are read in arrival order. Member events are applied
//!    (invites accepted or declined, membership kept, the last persona leaves an empty
//!    room); messages and reactions go through `triggers` (pure).
//! 3. Events that start nothing are marked processed. If any did, a turn is started
//!    (claiming them), the conversation is built (`context`, pure), the agent loop runs
//!    with the tools (`executor`), the final text is posted unless it is `[no reply]`, and
//!    the turn is finished with its outcome and usage, marking its events processed in the
//!    same transaction.
//! 4. Messages that arrived meanwhile are the next batch.

pub mod context;
mod executor;
mod membership;
mod post;
pub mod scheduler;
pub mod triggers;

use std::sync::Arc;
use std::time::Duration;

use ruma::{EventId, OwnedUserId, RoomId, UserId};
use serde_json::Value;

use crate::agent::{self, Llm, run_loop};
use crate::blocks::{Rich, WriterKey, read_payload};
use crate::clock::now_ms;
use crate::config::Settings;
use crate::matrix;
use crate::personas::{Persona, Personas};
use crate::render;
use crate::store::{self, Store, StoredEvent, TurnRecord, TurnRow};
use crate::strings;
use crate::tools::{RoomChoices, prompt_line, tool_specs};

pub use post::Poster;
use triggers::{Facts, Trigger};

/// A failure that leaves the batch pending, to be retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("homeserver: {0}")]
    Matrix(#[from] matrix::Error),
    #[error("persona: {0}")]
    Persona(#[from] crate::personas::Error),
}

/// Everything a turn needs.
pub struct Engine {
    pub store: Store,
    pub matrix: matrix::Client,
    pub personas: Personas,
    pub llm: Llm,
    pub poster: Poster,
    pub key: WriterKey,
    pub staleness_ms: i64,
    pub history_chars: usize,
    pub max_rounds: u32,
    pub group_requires_mention: bool,
    pub settings: Arc<Settings>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl Engine {
    /// Handles everything pending in `room_id`, including a turn a crash cut short.
    pub async fn drain_room(&self, room_id: &str) -> Result<(), Error> {
        if let Some((turn, events)) = self.store.unfinished_turn(room_id).await? {
            tracing::info!(turn = turn.id, room_id, "resuming a turn cut short");
            let triggers = self.triggers_of(&turn, &events).await?;
            self.run_turn(&turn, &events, &triggers).await?;
        }
        loop {
            let events = self.store.pending_events(room_id).await?;
            if events.is_empty() {
                return Ok(());
            }
            let mut quiet = Vec::new();
            let mut started: Vec<(&StoredEvent, &Persona, Trigger)> = Vec::new();
            for event in &events {
                match event.event_type.as_str() {
                    "m.room.member" => {
                        match self.membership(event).await {
                            Ok(()) => {}
                            // Refused for good (not retried forever): logged, and the event is done.
                            Err(Error::Matrix(e @ matrix::Error::Refused { .. }))
                            | Err(Error::Persona(crate::personas::Error::Matrix(e @ matrix::Error::Refused { .. }))) => {
                                tracing::warn!(event_id = %event.event_id, error = %e, "member event could not be applied");
                            }
                            Err(e) => return Err(e),
                        }
                        quiet.push(event.seq);
                    }
                    "m.room.message" | "m.reaction" => match self.trigger_of(event).await? {
                        Some((persona, trigger)) => started.push((event, persona, trigger)),
                        None => quiet.push(event.seq),
                    },
                    _ => quiet.push(event.seq),
                }
            }
            self.store.mark_processed(&quiet).await?;
            // One turn per persona addressed in the batch, in order of first address.
            let mut personas: Vec<&Persona> = Vec::new();
            for (_, p, _) in &started {
                if !personas.iter().any(|q| q.user_id == p.user_id) {
                    personas.push(p);
                }
            }
            for persona in personas {
                let mine: Vec<&(&StoredEvent, &Persona, Trigger)> =
                    started.iter().filter(|(_, p, _)| p.user_id == persona.user_id).collect();
                let seqs: Vec<i64> = mine.iter().map(|(e, _, _)| e.seq).collect();
                let asker = mine.last().map(|(e, _, _)| e.sender.clone()).unwrap_or_default();
                let id = self.store.start_turn(room_id, persona.user_id.as_str(), &asker, &seqs, now_ms()).await?;
                let turn = TurnRow { id, room_id: room_id.to_owned(), persona: persona.user_id.to_string(), asker };
                let evs: Vec<StoredEvent> = mine.iter().map(|(e, _, _)| (*e).clone()).collect();
                let trs: Vec<Trigger> = mine.iter().map(|(_, _, t)| t.clone()).collect();
                self.run_turn(&turn, &evs, &trs).await?;
            }
        }
    }

    /// Re-derives the triggers of a resumed turn's events.
    async fn triggers_of(&self, turn: &TurnRow, events: &[StoredEvent]) -> Result<Vec<Trigger>, Error> {
        let mut out = Vec::new();
        for e in events {
            if let Some((p, t)) = self.trigger_of_inner(e, false).await?
                && p.user_id.as_str() == turn.persona
            {
                out.push(t);
            }
        }
        Ok(out)
    }

    async fn trigger_of(&self, event: &StoredEvent) -> Result<Option<(&Persona, Trigger)>, Error> {
        self.trigger_of_inner(event, true).await
    }

    /// Which persona (if any) the event addresses, and why.
    async fn trigger_of_inner(
        &self,
        event: &StoredEvent,
        check_stale: bool,
    ) -> Result<Option<(&Persona, Trigger)>, Error> {
        if self.personas.get(&event.sender).is_some() {
            return Ok(None);
        }
        let joined = self.store.joined_members(&event.room_id).await?;
        let here: Vec<&Persona> =
            self.personas.all().iter().filter(|p| joined.iter().any(|u| u == p.user_id.as_str())).collect();
        if here.is_empty() {
            return Ok(None);
        }
        let is_dm = joined.len() == 2;
        let content = event.content();
        let relates = content.get("m.relates_to");
        let target = |k: &str| relates.and_then(|r| r.get(k)).and_then(Value::as_str).map(str::to_owned);
        let reply_target = relates
            .and_then(|r| r.get("m.in_reply_to"))
            .and_then(|r| r.get("event_id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let replied = match &reply_target {
            Some(id) => self.store.sent_message(id).await?,
            None => None,
        };
        let rel_target = match target("event_id") {
            Some(id) => self.store.sent_message(&id).await?,
            None => None,
        };
        let is_thread = target("rel_type").as_deref() == Some("m.thread");
        let buttons = if event.event_type == "m.reaction" {
            rel_target
                .as_ref()
                .and_then(|m| read_payload(&m.content).and_then(|p| Rich::from_value(p).ok()))
                .map(|r| r.buttons())
        } else {
            None
        };
        for persona in here {
            let pid = persona.user_id.as_str();
            let in_thread = match (is_thread, target("event_id")) {
                (true, Some(root)) => self.store.posted_in_thread(&event.room_id, &root, pid).await?,
                _ => false,
            };
            let facts = Facts {
                persona_id: pid,
                display_name: &persona.display_name,
                is_dm,
                sender_is_ours: false,
                sender_allowed: self.settings.allowed(&event.sender),
                now_ms: if check_stale { now_ms() } else { event.origin_ts },
                staleness_ms: self.staleness_ms,
                group_requires_mention: self.group_requires_mention,
                replies_to_persona: replied.as_ref().is_some_and(|m| m.sender == pid),
                in_persona_thread: in_thread,
                reacted_buttons: rel_target.as_ref().filter(|m| m.sender == pid).and(buttons.as_deref()),
            };
            if let Some(t) = triggers::trigger(&event.event, &facts) {
                return Ok(Some((persona, t)));
            }
        }
        Ok(None)
    }

    /// Runs one turn to the end and records it.
    async fn run_turn(&self, turn: &TurnRow, events: &[StoredEvent], triggers: &[Trigger]) -> Result<(), Error> {
        let (Ok(room), Ok(persona_id), Ok(asker)) = (
            RoomId::parse(turn.room_id.as_str()),
            UserId::parse(turn.persona.as_str()),
            UserId::parse(turn.asker.as_str()),
        ) else {
            self.store
                .finish_turn(turn.id, &TurnRecord { outcome: "invalid_ids".into(), ..Default::default() }, now_ms())
                .await?;
            return Ok(());
        };
        let Some(persona) = self.personas.get(persona_id.as_str()) else {
            self.store
                .finish_turn(turn.id, &TurnRecord { outcome: "persona_removed".into(), ..Default::default() }, now_ms())
                .await?;
            return Ok(());
        };
        let last_seq = events.iter().map(|e| e.seq).max().unwrap_or(i64::MAX);
        let thread_root = events.last().and_then(|e| thread_root_of(e.content()));
        let thread_root = thread_root.as_deref().and_then(|r| EventId::parse(r).ok());
        let joined = self.store.joined_members(room.as_str()).await?;
        let is_dm = joined.len() == 2;
        let history = self.store.history(room.as_str(), last_seq, 200).await?;
        let situation = context::Situation {
            persona_id: persona_id.as_str(),
            display_name: &persona.display_name,
            system_prompt: &persona.system_prompt,
            tools_line: prompt_line(),
            is_dm,
            room_id: room.as_str(),
            asker: asker.as_str(),
            now_ms: now_ms(),
            thread_root: thread_root.as_ref().map(|r| r.as_str()),
            budget: self.history_chars,
        };
        let messages = context::build(&situation, &history, triggers);
        let shared = self.store.shared_rooms(persona_id.as_str(), asker.as_str()).await?;
        let mut choices = RoomChoices { in_dm: is_dm, shared: Vec::new() };
        for r in shared.into_iter().filter(|r| r != room.as_str()) {
            let name = self.store.room_name(&r).await?.unwrap_or_else(|| "unnamed room".to_owned());
            choices.shared.push((r, name));
        }
        let tools = tool_specs(&choices);

        let typing = self.typing(&room, &persona_id);
        let mut executor = executor::Executor {
            metrics: &self.metrics,
            poster: &self.poster,
            store: &self.store,
            turn: turn.id,
            seq: 0,
            room: &room,
            persona: &persona_id,
            asker: &asker,
            is_dm,
            key: self.key,
            thread_root: thread_root.as_deref(),
        };
        let (result, conversation) = run_loop(&self.llm, messages, &tools, &mut executor, self.max_rounds).await;
        let seq = executor.seq;
        self.count_llm(&result, &conversation);
        typing.abort();
        let _ = self.matrix.typing(&room, &persona_id, false, 0).await;

        let record = match result {
            Ok(outcome) => {
                let mut record = TurnRecord {
                    outcome: if outcome.exhausted { "max_rounds".into() } else { "answered".into() },
                    rounds: outcome.rounds,
                    prompt_tokens: outcome.usage.prompt,
                    completion_tokens: outcome.usage.completion,
                };
                match outcome.text.as_deref().map(str::trim) {
                    Some(text) if text != strings::NO_REPLY && !text.is_empty() => {
                        if let Err(e) =
                            self.post_text(turn.id, seq, &room, &persona_id, text, thread_root.as_deref()).await
                        {
                            tracing::warn!(turn = turn.id, error = %e, "could not post the answer");
                            record.outcome = format!("post_failed: {e}");
                        }
                    }
                    Some(_) => record.outcome = "no_reply".into(),
                    None if outcome.exhausted => {
                        let _ = self
                            .post_text(
                                turn.id,
                                seq,
                                &room,
                                &persona_id,
                                strings::TOO_MANY_ROUNDS,
                                thread_root.as_deref(),
                            )
                            .await;
                    }
                    None => record.outcome = "no_reply".into(),
                }
                record
            }
            Err(e) => {
                tracing::error!(turn = turn.id, room = %room, error = %e, "the LLM failed; telling the user");
                let _ =
                    self.post_text(turn.id, seq, &room, &persona_id, strings::LLM_FAILED, thread_root.as_deref()).await;
                TurnRecord { outcome: format!("llm_failed: {e}"), ..Default::default() }
            }
        };
        tracing::info!(turn = turn.id, room = %room, outcome = %record.outcome, rounds = record.rounds, "turn finished");
        self.metrics.turn(&record.outcome);
        self.store.finish_turn(turn.id, &record, now_ms()).await?;
        Ok(())
    }

    fn count_llm(&self, result: &Result<agent::Outcome, agent::Error>, conversation: &[agent::Message]) {
        use crate::metrics::Metrics;
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

    async fn post_text(
        &self,
        turn: i64,
        seq: i64,
        room: &RoomId,
        persona: &UserId,
        text: &str,
        thread: Option<&EventId>,
    ) -> Result<(), post::Error> {
        let content = render::text(text, thread).map_err(|e| post::Error::Refused(e.to_string()))?;
        self.poster.send(turn, seq, room, persona, &content, thread.map(|t| t.as_str())).await.map(drop)
    }

    /// Keeps the persona's typing notice on until aborted (renewed every 20 s).
    fn typing(&self, room: &RoomId, persona: &UserId) -> tokio::task::JoinHandle<()> {
        let (matrix, room, persona): (_, ruma::OwnedRoomId, OwnedUserId) =
            (self.matrix.clone(), room.to_owned(), persona.to_owned());
        tokio::spawn(async move {
            loop {
                if let Err(e) = matrix.typing(&room, &persona, true, 30_000).await {
                    tracing::debug!(error = %e, "typing notice failed");
                }
                tokio::time::sleep(Duration::from_secs(20)).await;
            }
        })
    }
}

fn thread_root_of(content: &Value) -> Option<String> {
    let r = content.get("m.relates_to")?;
    (r.get("rel_type")?.as_str()? == "m.thread").then(|| r.get("event_id")?.as_str().map(str::to_owned)).flatten()
}
