//! The scheduler: one worker step per room with pending events, at most `cap` at once, so
//! a room's events are handled strictly in order while rooms proceed in parallel, and no
//! room starves: a step is one turn, and rooms are served round-robin from the queue
//! (`queue::RoomQueue`), a room that still has events after its step going to the back.
//!
//! Lifecycle: woken when the inbox queues rooms, when a step ends, or every few seconds (to
//! retry rooms whose last attempt failed) -> takes queued rooms that are neither busy nor
//! backing off, while under the cap -> a step does one turn's worth of work and ends -> a
//! room with events left is queued again (a failed one, after a pause). No query runs to
//! find work, unless other instances share the database (below).
//! With other instances on the database (`leases`), a step runs only under its room's
//! lease, a room another instance holds is left to it, and the leases' keeper queues rooms
//! whose work was stored by another instance or left by a dead one.
//! On shutdown (`stop`) no room is taken any more; the steps running then get `grace` to
//! finish, and what is still running after it is dropped mid-flight. All state is in the
//! store, so the next start resumes where they stopped (the queue is filled from the
//! store at start).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ruma::OwnedRoomId;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::leases::Leases;
use super::worker::Worker;
use crate::queue::RoomQueue;

/// How long a room whose step failed waits before it is tried again.
const RETRY: Duration = Duration::from_secs(3);

/// When to stop: the signal, and how long running steps then have.
pub struct Stop {
    pub signal: tokio::sync::watch::Receiver<bool>,
    pub grace: Duration,
}

pub async fn run(worker: Arc<Worker>, queue: Arc<RoomQueue>, cap: usize, stop: Stop, leases: Option<Leases>) {
    let keeper = leases.clone().map(|l| {
        let queue = queue.clone();
        tokio::spawn(async move { l.keep(queue).await })
    });
    schedule(worker, queue, cap, stop, leases.clone()).await;
    if let Some(keeper) = keeper {
        keeper.abort();
    }
    if let Some(leases) = leases {
        leases.release_all().await;
    }
}

/// One step in `room`, under its lease when there are leases: whether events were left
/// (`None`: it failed). A room another instance holds is left to it, as if idle.
async fn step(worker: &Worker, leases: Option<&Leases>, room: &ruma::RoomId) -> Option<bool> {
    if let Some(leases) = leases {
        match leases.claim(room).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(%room, "another instance has this room");
                return Some(false);
            }
            Err(e) => {
                tracing::warn!(%room, error = %e, "could not claim the room; will retry");
                return None;
            }
        }
    }
    let outcome = match worker.step(room).await {
        Ok(more) => Some(more),
        Err(e) => {
            tracing::warn!(%room, error = %e, "room handling failed; will retry");
            None
        }
    };
    if let Some(leases) = leases {
        leases.release(room).await;
    }
    outcome
}

async fn schedule(worker: Arc<Worker>, queue: Arc<RoomQueue>, cap: usize, mut stop: Stop, leases: Option<Leases>) {
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
    // Set once the stop signal came: until then, running steps may finish.
    let mut stopping: Option<Instant> = None;
    loop {
        let now = Instant::now();
        failed.retain(|_, retry_at| *retry_at > now);
        if let Some(deadline) = stopping {
            if workers.is_empty() {
                tracing::info!("every running turn finished; stopped");
                return;
            }
            if now >= deadline {
                tracing::warn!(
                    left = workers.len(),
                    "turns still running at the end of the grace period; they resume at the next start"
                );
                workers.abort_all();
                return;
            }
        }
        let free = if stopping.is_some() { 0 } else { cap.saturating_sub(busy.len()) };
        for room in queue.take(free, |r| !busy.contains(r) && !failed.contains_key(r)) {
            busy.insert(room.clone());
            let name = room.clone();
            let (worker, leases) = (worker.clone(), leases.clone());
            let handle = workers.spawn(async move {
                let outcome = step(&worker, leases.as_ref(), &room).await;
                (room, outcome)
            });
            rooms_of.insert(handle.id(), name);
        }
        let grace_ends = stopping.unwrap_or_else(|| now + stop.grace);
        tokio::select! {
            changed = stop.signal.changed(), if stopping.is_none() => {
                if changed.is_err() || *stop.signal.borrow() {
                    tracing::info!(running = workers.len(), grace_secs = stop.grace.as_secs(), "stopping: no new turns");
                    stopping = Some(Instant::now() + stop.grace);
                }
            }
            () = tokio::time::sleep_until(grace_ends), if stopping.is_some() => {}
            () = queue.pushed(), if stopping.is_none() => {}
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
                if stopping.is_some() {
                    continue;
                }
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
