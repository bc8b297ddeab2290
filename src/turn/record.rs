//! Record, then act: every model reply of a turn is stored before its tools run, and a
//! resumed turn replays the stored replies in order instead of asking the model again.
//! Its writes then reuse their write ids: those that landed are found in the outbox, and
//! the turn continues from the first that did not. Only past the record is the model
//! asked for more.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::agent::{self, Complete, Message, Reply, ToolSpec};
use crate::store::{self, Store};

/// The model as a resumable turn sees it.
pub struct Recorded<'a, L> {
    llm: &'a L,
    store: &'a Store,
    turn: i64,
    replay: Mutex<VecDeque<Reply>>,
    /// Rounds handed out so far (recorded or new).
    round: AtomicU32,
    replayed: AtomicU32,
}

impl<'a, L> Recorded<'a, L> {
    /// Loads what `turn` recorded before (nothing for a new turn).
    pub async fn load(llm: &'a L, store: &'a Store, turn: i64) -> Result<Self, store::Error> {
        let mut replay = VecDeque::new();
        for text in store.replies(turn).await? {
            replay.push_back(serde_json::from_str(&text)?);
        }
        Ok(Self { llm, store, turn, replay: Mutex::new(replay), round: AtomicU32::new(0), replayed: AtomicU32::new(0) })
    }

    /// How many replies came from the record rather than the model.
    pub fn replayed(&self) -> u32 {
        self.replayed.load(Ordering::Relaxed)
    }
}

impl<L: Complete + Sync> Complete for Recorded<'_, L> {
    async fn complete(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<Reply, agent::Error> {
        let round = self.round.fetch_add(1, Ordering::Relaxed) + 1;
        let recorded = self.replay.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
        if let Some(reply) = recorded {
            self.replayed.fetch_add(1, Ordering::Relaxed);
            return Ok(reply);
        }
        let reply = self.llm.complete(messages, tools).await?;
        let text = serde_json::to_string(&reply).map_err(|e| agent::Error::Suspended(e.to_string()))?;
        self.store
            .record_reply(self.turn, round, &text)
            .await
            .map_err(|e| agent::Error::Suspended(format!("could not record the model's reply: {e}")))?;
        Ok(reply)
    }
}
