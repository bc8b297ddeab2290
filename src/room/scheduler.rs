//! The scheduler: one worker step per room with pending events, at most `cap` at once, so
//! a room's events are handled strictly in order while rooms proceed in parallel, and no
//! room starves: a step is one turn, and rooms are served round-robin from the queue
//! (`queue::RoomQueue`), a room that still has events after its step going to the back.
//!
//! Lifecycle: woken when the inbox queues rooms, when a step ends, or every few seconds (to
//! retry rooms whose last attempt failed) -> takes queued rooms that are neither busy nor
//! backing off, while under the cap -> a step does one turn's worth of work and ends -> a
//! room with events left is queued again (a failed one, after a pause). No query runs to
//! find work.
//! On shutdown the workers are dropped mid-flight; all state is in the store, so the next
//! start resumes where they stopped (the queue is filled from the store at start).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ruma::OwnedRoomId;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::worker::Worker;
use crate::queue::RoomQueue;

/// How long a room whose step failed waits before it is tried again.
const RETRY: Duration = Duration::from_secs(3);

pub async fn run(worker: Arc<Worker>, queue: Arc<RoomQueue>, cap: usize) {
    let mut wait = Duration::from_millis(100);
    while let Err(e) = worker.load_unsettled().await {
        tracing::warn!(error = %e, "could not read the turns a stop cut short; retrying");
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY);
    }
    let mut busy: HashSet<OwnedRoomId> = HashSet::new();
    // Each step ends with its room and whether events were left (None: it failed).
    let mut workers: JoinSet<(OwnedRoomId, Option<bool>)> = JoinSet::new();
    let mut rooms_of: HashMap<tokio::task::Id, OwnedRoomId> = HashMap::new();
    // Rooms whose last step failed, and when they may be tried again.
    let mut failed: HashMap<OwnedRoomId, Instant> = HashMap::new();
    loop {
        let now = Instant::now();
        failed.retain(|_, retry_at| *retry_at > now);
        let free = cap.saturating_sub(busy.len());
        for room in queue.take(free, |r| !busy.contains(r) && !failed.contains_key(r)) {
            busy.insert(room.clone());
            let name = room.clone();
            let worker = worker.clone();
            let handle = workers.spawn(async move {
                let outcome = match worker.step(&room).await {
                    Ok(more) => Some(more),
                    Err(e) => {
                        tracing::warn!(%room, error = %e, "room handling failed; will retry");
                        None
                    }
                };
                (room, outcome)
            });
            rooms_of.insert(handle.id(), name);
        }
        tokio::select! {
            () = queue.pushed() => {}
            Some(done) = workers.join_next_with_id() => {
                let (room, outcome) = match done {
                    Ok((id, (room, outcome))) => {
                        rooms_of.remove(&id);
                        (room, outcome)
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "a room worker panicked; its room will be retried");
                        match rooms_of.remove(&e.id()) {
                            Some(room) => (room, None),
                            None => continue,
                        }
                    }
                };
                busy.remove(&room);
                match outcome {
                    Some(false) => queue.idle(&room),
                    Some(true) => queue.push([room]),
                    None => {
                        worker.unsettle(&room);
                        failed.insert(room.clone(), Instant::now() + RETRY);
                        queue.push([room]);
                    }
                }
            }
            () = tokio::time::sleep(RETRY), if !failed.is_empty() => {}
        }
    }
}
