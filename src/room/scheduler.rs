//! The scheduler: one worker step per room with pending events, at most `cap` at once, so
//! a room's events are handled strictly in order while rooms proceed in parallel, and no
//! room starves: a step is one turn, and rooms are served round-robin, the one served
//! least recently first (a room never served before comes first of all).
//!
//! Lifecycle: woken by the inbox, or when a step ends (or every few seconds, to retry
//! rooms whose last attempt failed) -> lists rooms with pending events -> orders them by
//! when they were last served -> starts a step for each idle room while under the cap ->
//! a step does one turn's worth of work and ends -> the scheduler looks again.
//! On shutdown the workers are dropped mid-flight; all state is in the store, so the next
//! start resumes where they stopped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ruma::OwnedRoomId;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::worker::Worker;

/// How often rooms are looked at without a wake-up (retries after failures).
const TICK: Duration = Duration::from_secs(3);

pub async fn run(worker: Arc<Worker>, wake: Arc<Notify>, cap: usize) {
    let mut busy: HashSet<OwnedRoomId> = HashSet::new();
    let mut workers: JoinSet<bool> = JoinSet::new();
    let mut rooms_of: HashMap<tokio::task::Id, OwnedRoomId> = HashMap::new();
    // When each room's last step started (a counter, not a clock).
    let mut served: HashMap<OwnedRoomId, u64> = HashMap::new();
    // Rooms whose last step failed, and when they may be tried again.
    let mut failed: HashMap<OwnedRoomId, Instant> = HashMap::new();
    let mut tick: u64 = 0;
    loop {
        match worker.rooms_with_pending().await {
            Ok(mut rooms) => {
                // Stable: rooms never served keep their arrival order, ahead of the rest.
                rooms.sort_by_key(|r| served.get(r).copied().unwrap_or(0));
                let pending: HashSet<&OwnedRoomId> = rooms.iter().collect();
                served.retain(|r, _| busy.contains(r) || pending.contains(r));
                let now = Instant::now();
                failed.retain(|_, retry_at| *retry_at > now);
                for room in rooms {
                    if busy.len() >= cap {
                        break;
                    }
                    if !failed.contains_key(&room) && busy.insert(room.clone()) {
                        tick += 1;
                        served.insert(room.clone(), tick);
                        let worker = worker.clone();
                        let name = room.clone();
                        let handle = workers.spawn(async move {
                            match worker.step(&room).await {
                                Ok(()) => true,
                                Err(e) => {
                                    tracing::warn!(%room, error = %e, "room handling failed; will retry");
                                    false
                                }
                            }
                        });
                        rooms_of.insert(handle.id(), name);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not list pending rooms"),
        }
        tokio::select! {
            () = wake.notified() => {}
            Some(done) = workers.join_next_with_id() => {
                let (id, ok) = match done {
                    Ok((id, ok)) => (id, ok),
                    Err(e) => {
                        tracing::error!(error = %e, "a room worker panicked; its room will be retried");
                        (e.id(), false)
                    }
                };
                if let Some(room) = rooms_of.remove(&id) {
                    busy.remove(&room);
                    if !ok {
                        failed.insert(room, Instant::now() + TICK);
                    }
                }
            }
            () = tokio::time::sleep(TICK) => {}
        }
    }
}
