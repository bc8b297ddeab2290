//! A room worker: drains one room's pending events, strictly in order.
//!
//! 1. A turn left `running` by a crash is resumed first, with the same id and events, so
//!    its writes reuse their transaction ids and nothing is posted twice.
//! 2. The room's pending events are read in arrival order. Member events are applied
//!    (`membership`); messages and reactions are triaged (`facts` + `triggers`).
//! 3. Events that start nothing are marked processed. The rest are grouped into one batch
//!    per persona addressed (in order of first address); each batch is claimed by a new
//!    turn in the same transaction that creates it, and run.
//! 4. Messages that arrived meanwhile are the next round of the loop.

use ruma::RoomId;

use super::Error;
use super::facts::Triage;
use super::membership::Membership;
use super::triggers::Trigger;
use crate::clock::now_ms;
use crate::matrix;
use crate::personas::{self, Persona};
use crate::store::{Store, StoredEvent, TurnRow};
use crate::turn::{Press, Turns};

/// Everything a room worker needs.
#[derive(Debug)]
pub struct Worker {
    store: Store,
    triage: Triage,
    membership: Membership,
    turns: Turns,
}

/// An event that starts a turn, with its persona and reason.
type Started<'a> = (&'a StoredEvent, &'a Persona, Trigger);

impl Worker {
    pub fn new(store: Store, triage: Triage, membership: Membership, turns: Turns) -> Self {
        Self { store, triage, membership, turns }
    }

    /// Rooms with pending events, oldest first (for the scheduler).
    pub async fn rooms_with_pending(&self) -> Result<Vec<ruma::OwnedRoomId>, Error> {
        Ok(self.store.rooms_with_pending().await?)
    }

    /// Handles everything pending in `room`, including a turn a crash cut short.
    pub async fn drain(&self, room: &RoomId) -> Result<(), Error> {
        if let Some((turn, events)) = self.store.unfinished_turn(room).await? {
            tracing::info!(turn = turn.id, %room, "resuming a turn cut short");
            let presses = self.presses_of(&turn, &events).await?;
            self.turns.run(&turn, &events, &presses).await?;
        }
        loop {
            let events = self.store.pending_events(room).await?;
            if events.is_empty() {
                return Ok(());
            }
            let mut quiet = Vec::new();
            let mut started: Vec<Started<'_>> = Vec::new();
            for event in &events {
                match event.event_type.as_str() {
                    "m.room.member" => {
                        self.apply_membership(event).await?;
                        quiet.push(event.seq);
                    }
                    "m.room.message" | "m.reaction" => match self.triage.trigger_of(event, true).await? {
                        Some((persona, trigger)) => started.push((event, persona, trigger)),
                        None => quiet.push(event.seq),
                    },
                    _ => quiet.push(event.seq),
                }
            }
            self.store.mark_processed(&quiet).await?;
            for batch in by_persona(&started) {
                let (_, persona, _) = batch[0];
                let (last, _, _) = batch[batch.len() - 1];
                let seqs: Vec<i64> = batch.iter().map(|(e, _, _)| e.seq).collect();
                let turn = self.store.start_turn(room, &persona.user_id, &last.sender, &seqs, now_ms()).await?;
                let events: Vec<StoredEvent> = batch.iter().map(|(e, _, _)| (*e).clone()).collect();
                let presses: Vec<Press> = batch.iter().filter_map(|(_, _, t)| press(t)).collect();
                self.turns.run(&turn, &events, &presses).await?;
            }
        }
    }

    /// A member event, applied. One the homeserver refuses for good is logged and done,
    /// not retried forever.
    async fn apply_membership(&self, event: &StoredEvent) -> Result<(), Error> {
        match self.membership.apply(event, &self.turns).await {
            Err(Error::Matrix(e @ matrix::Error::Refused { .. }))
            | Err(Error::Persona(personas::Error::Matrix(e @ matrix::Error::Refused { .. }))) => {
                tracing::warn!(event_id = %event.event_id, error = %e, "member event could not be applied");
                Ok(())
            }
            other => other,
        }
    }

    /// The button presses among a resumed turn's events, triaged again.
    async fn presses_of(&self, turn: &TurnRow, events: &[StoredEvent]) -> Result<Vec<Press>, Error> {
        let mut out = Vec::new();
        for e in events {
            if let Some((p, t)) = self.triage.trigger_of(e, false).await?
                && p.user_id == turn.persona
                && let Some(press) = press(&t)
            {
                out.push(press);
            }
        }
        Ok(out)
    }
}

fn press(trigger: &Trigger) -> Option<Press> {
    match trigger {
        Trigger::ButtonReact(p) => Some(p.clone()),
        _ => None,
    }
}

/// The started events grouped by persona, in order of each persona's first address.
fn by_persona<'a, 'b>(started: &'b [Started<'a>]) -> Vec<Vec<&'b Started<'a>>> {
    let mut batches: Vec<Vec<&Started<'a>>> = Vec::new();
    for s in started {
        match batches.iter_mut().find(|b| b[0].1.user_id == s.1.user_id) {
            Some(batch) => batch.push(s),
            None => batches.push(vec![s]),
        }
    }
    batches
}
