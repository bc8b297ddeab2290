//! Token budgets: per asker, per room and for the deployment, over a rolling day, kept in
//! the store so a restart resets nothing. A service of its own, apart from the turn that
//! uses it: `!usage` reads it too. [`Metered`] wraps the LLM for one turn: before
//! each call it reserves the estimated cost (the prompt's characters / 4, plus
//! `max_tokens`); a budget without room for it means the call is not made; after the
//! call the reservation is settled with the usage the API reported (or, where it reported
//! none, the estimate), a prompt token the provider reused from its cache counting for
//! `budget.cached_token_weight` of a fresh one. A call cut part-way or timed out is settled with the prompt's
//! estimate plus what streamed (characters / 4): never free, or a member could spend
//! without limit on answers that stop short.

use std::sync::Mutex;

use regex::Regex;
use ruma::UserId;

use crate::agent::{self, Complete, LiveText, Message, Reply, ToolSpec};
use crate::clock::now_ms;
use crate::store::{self, BudgetKind, Budgets, DayUse, Spent, Store};
use ruma::RoomId;

/// The budgets and who is exempt from the per-user one.
#[derive(Debug)]
pub struct Budget {
    budgets: Budgets,
    exempt: Vec<Regex>,
    max_tokens: u32,
    /// What a cached prompt token counts for (`budget.cached_token_weight`).
    cached_weight: f64,
}

impl Budget {
    pub fn new(budgets: Budgets, exempt: Vec<Regex>, max_tokens: u32) -> Self {
        Self { budgets, exempt, max_tokens, cached_weight: 1.0 }
    }

    /// Cached prompt tokens count for `weight` of a fresh one.
    pub fn with_cached_weight(self, weight: f64) -> Self {
        Self { cached_weight: weight.clamp(0.0, 1.0), ..self }
    }

    /// What a call's reported usage costs against the budgets: fresh prompt and
    /// completion tokens whole, cached ones at their weight (rounded up).
    pub fn cost(&self, usage: agent::Usage) -> u64 {
        let cached = (usage.cached as f64 * self.cached_weight).ceil() as u64;
        usage.fresh() + cached + usage.completion
    }

    /// Whether `user` is exempt from per-user limits (`limits.exempt`).
    pub fn exempt(&self, user: &UserId) -> bool {
        self.exempt.iter().any(|re| re.is_match(user.as_str()))
    }

    /// The budgets that apply to `asker` (no per-user one when exempt).
    pub fn for_asker(&self, asker: &UserId) -> Budgets {
        Budgets { per_user: if self.exempt(asker) { 0 } else { self.budgets.per_user }, ..self.budgets }
    }

    /// The limit of a spent budget of `kind` (for the notice).
    pub fn limit(&self, kind: BudgetKind) -> u64 {
        match kind {
            BudgetKind::User => self.budgets.per_user,
            BudgetKind::Room => self.budgets.per_room,
            BudgetKind::Deployment => self.budgets.total,
        }
    }

    /// Whether this spent budget still needs telling: the first time, then not until it
    /// refills (kept in the store, so a restart does not repeat it).
    pub async fn first_notice(
        &self,
        store: &Store,
        room: &RoomId,
        asker: &UserId,
        spent: Spent,
    ) -> Result<bool, store::Error> {
        let key = match spent.kind {
            BudgetKind::User => format!("user {asker}"),
            BudgetKind::Room => format!("room {room}"),
            BudgetKind::Deployment => "deployment".to_owned(),
        };
        store.budget_notice_due(&key, spent.refills_at, now_ms()).await
    }

    /// What `!usage` reports for `asker`.
    pub async fn day_use(&self, store: &Store, asker: &UserId) -> Result<(DayUse, Option<u64>), store::Error> {
        let used = store.day_use(asker, now_ms()).await?;
        let limit = Some(self.for_asker(asker).per_user).filter(|n| *n > 0);
        Ok((used, limit))
    }
}

/// The LLM as one turn may use it: every call within the budgets.
pub struct Metered<'a, L> {
    pub llm: &'a L,
    pub store: &'a Store,
    pub budget: &'a Budget,
    pub room: &'a RoomId,
    pub asker: &'a UserId,
    /// Why the last call was not made, if it was not.
    stopped: Mutex<Option<Stop>>,
}

/// Why a metered call was not made.
#[derive(Debug)]
pub enum Stop {
    Spent(Spent),
    Store(store::Error),
}

impl<'a, L> Metered<'a, L> {
    pub fn new(llm: &'a L, store: &'a Store, budget: &'a Budget, room: &'a RoomId, asker: &'a UserId) -> Self {
        Self { llm, store, budget, room, asker, stopped: Mutex::new(None) }
    }

    /// Why the loop's last call was refused, if it was.
    pub fn stopped(self) -> Option<Stop> {
        self.stopped.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn stop(&self, why: Stop) -> agent::Error {
        let text = match &why {
            Stop::Spent(s) => format!("{:?} budget spent", s.kind),
            Stop::Store(e) => format!("budget store: {e}"),
        };
        *self.stopped.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
        agent::Error::NotAllowed(text)
    }
}

/// Characters of a request, for the estimate.
fn request_chars(messages: &[Message], tools: &[ToolSpec]) -> usize {
    let text: usize = messages.iter().map(Message::chars).sum();
    text + tools.iter().map(|t| t.description.len() + t.parameters.to_string().len()).sum::<usize>()
}

impl<L: Complete + Sync> Complete for Metered<'_, L> {
    async fn complete(&self, messages: &[Message], tools: &[ToolSpec], live: &LiveText) -> Result<Reply, agent::Error> {
        let answered = self.metered(request_chars(messages, tools), || async {
            self.llm.complete(messages, tools, live).await.map(Some)
        });
        Ok(answered.await?.unwrap_or_default())
    }

    async fn fill(&self, messages: &[Message], fill: &agent::Fill) -> Result<Option<Reply>, agent::Error> {
        let chars = request_chars(messages, &[]) + fill.ask.len() + fill.schema.to_string().len();
        self.metered(chars, || self.llm.fill(messages, fill)).await
    }
}

impl<L> Metered<'_, L> {
    /// `call`, a request of `chars` characters, made only if the budgets allow its
    /// estimate, and settled at what it cost (nothing when it was not made: `None`). The
    /// call's future is made once the reservation is (a model call's future is large in a
    /// debug build; held beside the reservation's, it would grow every turn's stack).
    async fn metered<F: std::future::Future<Output = Result<Option<Reply>, agent::Error>>>(
        &self,
        chars: usize,
        call: impl FnOnce() -> F,
    ) -> Result<Option<Reply>, agent::Error> {
        let prompt = (chars / 4) as u64;
        let estimate = prompt + u64::from(self.budget.max_tokens);
        let budgets = self.budget.for_asker(self.asker);
        let reserved = self.store.reserve_tokens(self.asker, self.room, estimate, budgets, now_ms()).await;
        let id = match reserved {
            Ok(Ok(id)) => id,
            Ok(Err(spent)) => return Err(self.stop(Stop::Spent(spent))),
            Err(e) => return Err(self.stop(Stop::Store(e))),
        };
        let result = call().await;
        let reported = result.as_ref().ok().and_then(Option::as_ref).map(|r| r.usage).unwrap_or_default();
        let used = match &result {
            Ok(Some(reply)) if reply.usage.prompt + reply.usage.completion > 0 => self.budget.cost(reply.usage),
            Ok(Some(_)) => estimate,
            // Not asked (a model that cannot be asked for a call's arguments).
            Ok(None) => 0,
            // A stream cut part-way, or a call that timed out, was read and partly
            // answered: the prompt, and what streamed before it stopped.
            Err(agent::Error::Cut(so_far, _)) => prompt + (so_far.len() / 4) as u64,
            Err(agent::Error::TimedOut(_)) => prompt,
            // A call refused outright is not billed by the APIs richbot talks to.
            Err(_) => 0,
        };
        if let Err(e) = self.store.settle_tokens(id, used, reported.prompt, reported.cached).await {
            tracing::warn!(error = %e, "could not settle a token reservation; the estimate stands");
        }
        result
    }
}
