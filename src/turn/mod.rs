//! The turn stage: one LLM turn for one room, persona and asker.
//!
//! Lifecycle of a turn (the room stage has already claimed its events in the store):
//! 1. The [`Scope`] is settled: room, persona, asker, whether the room is a DM, and the
//!    thread the turn answers in (the last triggering event's).
//! 2. The conversation is built (`context`, pure) from the room's stored history up to
//!    the moment the turn starts (later answers of the persona included); the
//!    tools are offered with the rooms the asker may name (`tools::targets::choices`).
//! 3. The agent loop runs with the persona's typing notice (on after a second), within
//!    the turn's deadline and its bounds (rounds, tool calls per reply); every model call
//!    is metered against the token budgets (`crate::budget`). Each tool call goes through the
//!    [`runner`](runner::Runner): `plan`, the sandbox (`tools::targets`), the write cap,
//!    rendering, and the outbox, which gives every write a transaction id fixed before
//!    its first attempt.
//! 4. The final text is posted unless it is `[no reply]`; the LLM failing, the round
//!    limit, the deadline or a spent budget is told to the person as an `m.notice`. The
//!    turn is finished with its [`Outcome`] and usage, which marks its events processed in
//!    the same transaction.
//!
//! A turn that only posts a notice (`notice`) records the notice before posting it. A
//! crash anywhere leaves the turn `running`; the room stage resumes it with the same id,
//! so its writes reuse their transaction ids and nothing is posted twice.

mod answer;
mod close;
pub mod context;
mod conversation;
mod deadline;
mod live;
pub mod media;
mod notices;
mod outcome;
mod reach;
mod record;
mod runner;
mod scope;
mod stop;
mod tools;

use std::collections::HashMap;
use std::sync::Arc;

use ruma::OwnedUserId;
use std::time::Duration;

use crate::agent::{self, Bounds, Llm, run_loop};
use crate::approval::Approvals;
use crate::blocks::WriterKey;
use crate::budget::{self, Budget};
use crate::clock::now_ms;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, WriteId};
use crate::personas::Personas;
use crate::schedules::schedule_specs;
use crate::store::{self, Notice, Store, StoredEvent, TurnRecord, TurnRow};
use crate::strings;
use crate::tools::registry::For;
use crate::tools::{Toolbox, poll_specs, tool_specs};

/// The write number of a notice-only turn's notice: apart from any write the turn made
/// before it became one (an undelivered answer).
const NOTICE_SEQ: i64 = 1_000_000;

/// Why a turn is left `running`, to be resumed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    /// A write cannot be made now (the homeserver is unreachable); resumed later.
    #[error("suspended: {0}")]
    Suspended(String),
}

pub use context::Press;
pub use outcome::{Outcome, UnknownOutcome};
pub use scope::{Parties, Scope};
pub use tools::scheduled::ScheduleKit;

/// How a turn is run, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The content key rich payloads are written under.
    pub key: WriterKey,
    /// Characters of room history in the prompt at most.
    pub history_chars: usize,
    /// Model rounds per turn, and tool calls run per model reply.
    pub bounds: Bounds,
    /// Sends and edits made by tool calls per turn.
    pub writes_per_turn: u32,
    /// A whole turn ends by then.
    pub deadline: Duration,
    /// An answer not delivered by then (the homeserver down) is given up, and said so.
    pub delivery_deadline: Duration,
}

/// Runs turns. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Turns {
    store: Store,
    llm: Llm,
    outbox: Outbox,
    personas: Personas,
    metrics: Arc<Metrics>,
    budget: Budget,
    limits: Limits,
    toolbox: Toolbox,
    approvals: Approvals,
    /// The personas with an LLM endpoint of their own; the others use `llm`.
    models: HashMap<OwnedUserId, Llm>,
    /// Fetches members' pictures and files (`with_media`).
    media: Option<crate::media::Media>,
    /// Ends polls at their time (`with_polls`).
    polls: Option<crate::polls::Closer>,
    /// Schedules' bounds, the default zone, and the ticker to wake (`with_schedules`).
    schedules: ScheduleKit,
    /// Hears voice messages and speaks answers (`with_voice`).
    voice: crate::speech::Voice,
}

impl Turns {
    pub fn new(
        store: Store,
        llm: Llm,
        outbox: Outbox,
        personas: Personas,
        metrics: Arc<Metrics>,
        budget: Budget,
        limits: Limits,
    ) -> Self {
        let approvals = Approvals::new(store.clone());
        let (toolbox, models) = (Toolbox::default(), HashMap::new());
        let (media, polls, schedules, voice) = (None, None, ScheduleKit::default(), Default::default());
        Self {
            store,
            llm,
            outbox,
            personas,
            metrics,
            budget,
            limits,
            toolbox,
            approvals,
            models,
            media,
            polls,
            schedules,
            voice,
        }
    }

    /// Gives these personas their own LLM endpoint (`[[personas]]` `model`, `base_url`, ...).
    pub fn with_models(self, models: HashMap<OwnedUserId, Llm>) -> Self {
        Self { models, ..self }
    }

    /// The chat client of `persona`.
    fn llm_of(&self, persona: &ruma::UserId) -> &Llm {
        self.models.get(persona).unwrap_or(&self.llm)
    }

    /// Offers `toolbox`'s tools besides the rich ones, with approvals decided through
    /// `approvals` (the inbox's).
    pub fn with_tools(self, toolbox: Toolbox, approvals: Approvals) -> Self {
        Self { toolbox, approvals, ..self }
    }

    /// Pictures and files reach the model through `media`.
    pub fn with_media(self, media: crate::media::Media) -> Self {
        Self { media: Some(media), ..self }
    }

    /// Ends polls at their `end_after_secs` through `closer` (woken when one is started).
    pub fn with_polls(self, closer: crate::polls::Closer) -> Self {
        Self { polls: Some(closer), ..self }
    }

    /// Schedules made in turns wake `kit`'s ticker, within its bounds.
    pub fn with_schedules(self, kit: ScheduleKit) -> Self {
        Self { schedules: kit, ..self }
    }

    /// Members' voice messages are heard (and answers spoken) through `voice`.
    pub fn with_voice(self, voice: crate::speech::Voice) -> Self {
        Self { voice, ..self }
    }

    /// What speaking an answer needs (`media::voice_out`).
    fn speaker(&self) -> media::voice_out::Speaker<'_> {
        let (store, outbox, metrics) = (&self.store, &self.outbox, &*self.metrics);
        media::voice_out::Speaker { store, outbox, metrics, media: &self.media, voice: &self.voice }
    }

    /// `!usage`: the asker's use and limit over the rolling day (voice messages' seconds
    /// too, when they are heard), as a notice turn.
    pub async fn usage(&self, parties: Parties<'_>, events: &[crate::store::StoredEvent]) -> Result<Outcome, Error> {
        let asker = parties.asker;
        let (u, limit) = self.budget.day_use(&self.store, asker).await?;
        let mut text = strings::usage(asker.as_str(), u.tokens, u.turns, u.prompt, u.cached, limit);
        if let Some(listening) = &self.voice.listening {
            let heard = self.store.audio_seconds_today(asker, crate::clock::now_ms()).await?;
            let limit = listening.seconds_per_day;
            text.push_str(&strings::voice_usage(heard, Some(limit).filter(|n| *n > 0 && !self.budget.exempt(asker))));
        }
        self.notice(parties, events, text, Outcome::Command("usage".to_owned())).await
    }

    /// Runs `turn` (answering `events`, with the button `presses` among them) to the end
    /// and records it. An `Err` leaves the turn `running`, to be resumed from its record:
    /// the store failed, or a write cannot be made now (the homeserver is down).
    pub async fn run(&self, turn: &TurnRow, events: &[StoredEvent], presses: &[Press]) -> Result<Outcome, Error> {
        let scope = scope::settle(&self.store, turn, events).await?;
        if let Some(notice) = &turn.notice {
            let outcome = notice.outcome.parse().unwrap_or(Outcome::NoReply);
            let close = self.closer(turn, &scope);
            close.tell(WriteId { turn: turn.id, seq: NOTICE_SEQ }, &notice.text).await?;
            return Ok(self.finish(turn, outcome, TurnRecord::default()).await?);
        }
        if now_ms().saturating_sub(turn.started_at) > crate::clock::ms(self.limits.delivery_deadline) {
            // Past the delivery deadline: the answer is lost; say so (when the homeserver
            // takes it) instead of trying on.
            tracing::warn!(turn = turn.id, room = %turn.room_id, "gave up delivering an answer; telling the person");
            let notice = Notice { outcome: Outcome::Undelivered.to_string(), text: strings::UNDELIVERED.to_owned() };
            self.store.set_turn_notice(turn.id, &notice).await?;
            let turn = TurnRow { notice: Some(notice), ..turn.clone() };
            return Box::pin(self.run(&turn, events, presses)).await;
        }
        let Some(persona) = self.personas.get(&turn.persona) else {
            return Ok(self.finish(turn, Outcome::PersonaRemoved, TurnRecord::default()).await?);
        };
        let occurrences = tools::scheduled::Occurrences {
            store: &self.store,
            outbox: &self.outbox,
            metrics: &self.metrics,
            timezone: self.schedules.timezone,
            key: self.limits.key,
        };
        if let Some(outcome) = occurrences.post(turn, &scope, events).await? {
            return Ok(self.finish(turn, outcome, TurnRecord::default()).await?);
        }
        let choices = tools::targets::choices(&self.store, &scope).await?;
        let who = For { servers: persona.tools.as_deref(), asker: &scope.asker, room: &scope.room };
        let rich = [tool_specs(self.outbox.interval_ms()), poll_specs(), schedule_specs()].concat();
        let offered = self.toolbox.offer(rich, who);
        let messages = self
            .conversation(turn.id, &scope, persona, conversation::Asked { events, presses }, &choices, offered.gated())
            .await?;
        let tools = offered.specs();

        let typing = self.outbox.typing(&scope.room, &scope.persona);
        let metered =
            budget::Metered::new(self.llm_of(&scope.persona), &self.store, &self.budget, &scope.room, &scope.asker);
        let shown = live::Live::new(&self.outbox, &scope, turn.id);
        let recorded = record::Recorded::load(&metered, &self.store, &self.metrics, &shown, turn).await?;
        let deadline = deadline::Deadline::default();
        let kit = reach::Kit {
            metrics: &self.metrics,
            offered: &offered,
            mcp: self.toolbox.mcp(),
            approvals: &self.approvals,
            deadline: &deadline,
            media: self.media.as_ref(),
            polls: self.polls.as_ref(),
            schedules: &self.schedules,
            asked_at: events.iter().map(|e| e.received_at).max().unwrap_or(turn.started_at),
        };
        let reach = reach::Reach::new(&self.store, &self.outbox, kit, &scope, turn.id, self.limits);
        let runner = runner::Runner::new(reach, &shown);
        let (live_text, _) = tokio::sync::watch::channel(String::new());
        let bounded = run_loop(&recorded, messages, &tools, &runner, self.limits.bounds, &live_text);
        let result = deadline.run(self.limits.deadline, bounded).await;
        shown.withdraw_carried().await;
        let next = runner.next_write();
        typing.stop().await;
        let replayed = recorded.replayed();
        let failed = recorded.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let stopped = metered.stopped();
        let close = self.closer(turn, &scope);
        let (outcome, record) = match result {
            Err(_) => {
                // A reply streaming when the clock ran out ends with what had arrived.
                let so_far = live_text.borrow().clone();
                if let Err(notices::PostError::Later(why)) = shown.cut_off(&so_far).await {
                    return Err(Error::Suspended(why));
                }
                (close.deadline(next).await?, TurnRecord::default())
            }
            Ok((result, conversation)) => {
                record::count_llm(&self.metrics, &result, &conversation, replayed);
                match (result, stopped) {
                    (Err(agent::Error::Suspended(why)), _) => return Err(Error::Suspended(why)),
                    (Err(_), Some(budget::Stop::Store(e))) => return Err(e.into()),
                    (Err(_), Some(budget::Stop::Spent(spent))) => {
                        if self.budget.first_notice(&self.store, &scope.room, &scope.asker, spent).await? {
                            close.tell(next, &notices::budget_spent(spent, self.budget.limit(spent.kind))).await?;
                        }
                        (Outcome::BudgetSpent(format!("{:?}", spent.kind).to_lowercase()), TurnRecord::default())
                    }
                    (Err(e), None) => (close.llm_failed(next, e).await?, TurnRecord::default()),
                    (Ok(done), _) => {
                        let answer = close::Answer { next, done, failed, wrote: runner.wrote() };
                        self.speaker().answered(&close, answer, persona, events).await?
                    }
                }
            }
        };
        Ok(self.finish(turn, outcome, record).await?)
    }

    fn closer<'a>(&'a self, turn: &'a TurnRow, scope: &'a Scope) -> close::Closer<'a> {
        close::Closer { outbox: &self.outbox, llm: self.llm_of(&turn.persona), scope, turn: turn.id }
    }

    /// Starts and runs a turn that only posts `text` as a notice and ends with `outcome`,
    /// claiming `seqs` (so they are answered by it, and by nothing else).
    pub async fn notice(
        &self,
        parties: Parties<'_>,
        events: &[StoredEvent],
        text: String,
        outcome: Outcome,
    ) -> Result<Outcome, Error> {
        let Parties { room, persona, asker } = parties;
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        let notice = Notice { outcome: outcome.to_string(), text };
        let turn = self.store.start_turn(room, persona, asker, &seqs, Some(&notice), now_ms()).await?;
        self.run(&turn, events, &[]).await
    }

    /// Records the end of a turn (its events become processed in the same transaction).
    pub async fn finish(&self, turn: &TurnRow, outcome: Outcome, record: TurnRecord) -> Result<Outcome, store::Error> {
        tracing::info!(turn = turn.id, room = %turn.room_id, %outcome, rounds = record.rounds, "turn finished");
        self.metrics.turn(outcome.kind());
        let record = TurnRecord { outcome: outcome.to_string(), ..record };
        if !self.store.finish_turn(turn.id, &record, now_ms()).await? {
            tracing::warn!(turn = turn.id, room = %turn.room_id, "the turn was finished elsewhere already; its first outcome stands");
        }
        Ok(outcome)
    }
}
