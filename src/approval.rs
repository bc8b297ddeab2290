//! Approval by the asker: a tool call listed in its server's `approval` runs only once the
//! person who asked allows it, by reacting to richbot's notice with ✅ (or ❌ to refuse).
//!
//! Lifecycle: the turn opens an approval (stored, with its deadline), posts the notice and
//! waits here ([`Approvals::wait`]), holding its room. The asker's reaction is decided at
//! the inbox door ([`Approvals::at_door`]), before its transaction is answered, and wakes
//! the waiting turn; every reaction to an approval notice (anyone's, any key) is settled
//! there, so none of them starts a turn of its own. No answer by the deadline is a
//! timeout, which counts as a refusal. The first decision stands, and a reaction sent
//! after the deadline never decides. A decision holds for exactly what the notice showed
//! (its hash is stored with it) and for one run of the call: the turn spends it when the
//! call starts, so a run cut off by a crash is asked for again, never repeated on it.
//!
//! Everything is in the store: a restart finds the waiting approval through the resumed
//! turn (same call, same approval, same deadline), a reaction that arrived while richbot
//! was down is decided when the homeserver delivers it, and among several instances the
//! one that takes the reaction decides, and the waiting turn on another reads the decision
//! within a second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

use crate::clock::now_ms;
use crate::store::{self, Approval, NewEvent, Store};

/// The reaction keys of the notice's buttons.
pub const ALLOW_KEY: &str = "✅";
pub const DENY_KEY: &str = "❌";

/// How an approval ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    /// No answer by the deadline.
    Timeout,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Timeout => "timeout",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [Decision::Allow, Decision::Deny, Decision::Timeout].into_iter().find(|d| d.as_str() == s)
    }
}

/// What a reaction key says: ✅ allows and ❌ denies, with or without the emoji variation
/// selector (U+FE0F) that some clients add; anything else says nothing.
pub fn decision_of_key(key: &str) -> Option<Decision> {
    match key.strip_suffix('\u{fe0f}').unwrap_or(key) {
        ALLOW_KEY => Some(Decision::Allow),
        DENY_KEY => Some(Decision::Deny),
        _ => None,
    }
}

/// Approvals waiting in this process, by id. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Approvals {
    store: Store,
    waiting: Arc<Mutex<HashMap<i64, Arc<Notify>>>>,
    /// How often a waiting turn reads its approval again even without a wake-up.
    recheck: Duration,
}

/// The re-read alone: for a decision whose wake-up was lost.
const RECHECK: Duration = Duration::from_secs(5);
/// The re-read among several instances, where the asker's reaction may reach another
/// instance than the waiting turn's, and the database is the only wake-up.
const RECHECK_SHARED: Duration = Duration::from_secs(1);

impl Approvals {
    pub fn new(store: Store) -> Self {
        Self { store, waiting: Arc::default(), recheck: RECHECK }
    }

    /// Other instances share the database: a decision may be taken by any of them.
    pub fn sharing(self) -> Self {
        Self { recheck: RECHECK_SHARED, ..self }
    }

    /// Settles the reactions to approval notices among `events` and decides with those of
    /// the askers; to run before the events are stored, so a retried transaction decides
    /// again (the first decision stands).
    pub async fn at_door(&self, events: &mut [NewEvent]) -> Result<(), store::Error> {
        let reactions: Vec<(usize, String, String)> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.event_type == "m.reaction")
            .filter_map(|(i, e)| {
                let v: Value = serde_json::from_str(&e.event).ok()?;
                let rel = v.get("content")?.get("m.relates_to")?;
                let target = rel.get("event_id")?.as_str()?.to_owned();
                Some((i, target, rel.get("key").and_then(Value::as_str).unwrap_or_default().to_owned()))
            })
            .collect();
        if reactions.is_empty() {
            return Ok(());
        }
        let targets: Vec<&str> = reactions.iter().map(|(_, t, _)| t.as_str()).collect();
        let approvals = self.store.approvals_by_notice(&targets).await?;
        for (i, target, key) in &reactions {
            let Some(a) = approvals.iter().find(|a| a.notice_event.as_ref().is_some_and(|n| n.as_str() == target))
            else {
                continue;
            };
            let event = &mut events[*i];
            event.processed = true;
            let reaction =
                Reaction { sender: event.sender.as_str(), room: event.room_id.as_str(), key, id: &event.event_id };
            if self.settle(a, reaction, event.origin_ts).await? {
                self.wake(a.id);
            }
        }
        Ok(())
    }

    /// Decides `a` with one reaction to its notice, if it is the asker's in the approval's
    /// room and says yes or no; whether it decided.
    async fn settle(&self, a: &Approval, r: Reaction<'_>, sent_at: i64) -> Result<bool, store::Error> {
        if r.sender != a.asker.as_str() || r.room != a.room_id.as_str() {
            tracing::info!(
                approval = a.id,
                sender = r.sender,
                "a reaction to an approval notice by someone else; ignored"
            );
            return Ok(false);
        }
        let Some(decision) = decision_of_key(r.key) else { return Ok(false) };
        // A reaction sent after the deadline decides nothing, however soon it arrives.
        let decided = self.store.decide_approval(a.id, decision.as_str(), Some(r.id), sent_at).await?;
        if decided {
            tracing::info!(approval = a.id, tool = %a.tool, decision = decision.as_str(), "the asker decided");
        }
        Ok(decided)
    }

    /// Settles reactions to `a`'s notice that were stored before the notice was known as
    /// one: a turn cut off between posting its notice and recording it (a crash, a kill)
    /// records it when resumed, and the asker may have reacted in between; the door took
    /// such a reaction for an ordinary one.
    async fn settle_stored(&self, a: &Approval) -> Result<(), store::Error> {
        let Some(notice) = a.notice_event.as_deref() else { return Ok(()) };
        let mut settled = Vec::new();
        for e in self.store.pending_events(&a.room_id).await? {
            let relation = e.content().get("m.relates_to");
            if e.event_type != "m.reaction"
                || relation.and_then(|r| r.get("event_id")).and_then(Value::as_str) != Some(notice.as_str())
            {
                continue;
            }
            settled.push(e.seq);
            let key = relation.and_then(|r| r.get("key")).and_then(Value::as_str).unwrap_or_default();
            let reaction = Reaction { sender: e.sender.as_str(), room: e.room_id.as_str(), key, id: &e.event_id };
            self.settle(a, reaction, e.origin_ts).await?;
        }
        self.store.mark_processed(&settled).await
    }

    fn wake(&self, id: i64) {
        if let Some(n) = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&id) {
            n.notify_one();
        }
    }

    /// Waits until `approval` is decided, or its deadline passes (then it is decided as a
    /// timeout, unless a decision came first).
    pub async fn wait(&self, approval: &Approval) -> Result<Decision, store::Error> {
        let id = approval.id;
        let notify = Arc::new(Notify::new());
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id, notify.clone());
        let _registered = Unregister(self, id);
        loop {
            let mut now = self.store.approval(id).await?;
            if let Some(a) = now.as_ref().filter(|a| a.decision.is_none()) {
                self.settle_stored(a).await?;
                now = self.store.approval(id).await?;
            }
            if let Some(d) = now.as_ref().and_then(|a| a.decision.as_deref()).and_then(Decision::parse) {
                return Ok(d);
            }
            let left = approval.expires_at.saturating_sub(now_ms());
            if left <= 0 || now.is_none() {
                self.store.decide_approval(id, Decision::Timeout.as_str(), None, i64::MIN).await?;
                continue;
            }
            let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
            tokio::select! {
                () = notify.notified() => {}
                () = tokio::time::sleep(left.min(self.recheck)) => {}
            }
        }
    }
}

/// One reaction to an approval notice: who sent it where, its key and its event.
struct Reaction<'a> {
    sender: &'a str,
    room: &'a str,
    key: &'a str,
    id: &'a ruma::EventId,
}

/// Takes a waiter off the list when its wait ends (or is dropped).
struct Unregister<'a>(&'a Approvals, i64);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.0.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_and_cross_with_or_without_the_variation_selector() {
        assert_eq!(decision_of_key("✅"), Some(Decision::Allow));
        assert_eq!(decision_of_key("✅\u{fe0f}"), Some(Decision::Allow));
        assert_eq!(decision_of_key("❌"), Some(Decision::Deny));
        assert_eq!(decision_of_key("❌\u{fe0f}"), Some(Decision::Deny));
        for other in ["👍", "✔️", "", "✅✅", "\u{fe0f}"] {
            assert_eq!(decision_of_key(other), None, "{other:?}");
        }
    }

    #[test]
    fn decisions_read_back_as_written() {
        for d in [Decision::Allow, Decision::Deny, Decision::Timeout] {
            assert_eq!(Decision::parse(d.as_str()), Some(d));
        }
        assert_eq!(Decision::parse("maybe"), None);
    }
}
