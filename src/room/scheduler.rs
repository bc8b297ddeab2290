//! The scheduler: one worker per room with pending events, at most `cap` at once, so a
//! room's events are handled strictly in order while rooms proceed in parallel.
//!
//! Lifecycle: woken by the inbox (or every few seconds, to retry rooms whose last attempt
//! failed) -> lists rooms with pending events -> starts a worker for each idle room while
//! under the cap -> a worker drains its room and exits -> the scheduler looks again.
//! On shutdown the workers are dropped mid-flight; all state is in the store, so the next
//! start resumes where they stopped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ruma::OwnedRoomId;
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::worker::Worker;

/// How often rooms are looked at without a wake-up (retries after failures).
const TICK: Duration = Duration::from_secs(3);

pub async fn run(worker: Arc<Worker>, wake: Arc<Notify>, cap: usize) {
    let mut busy: HashSet<OwnedRoomId> = HashSet::new();
    let mut workers: JoinSet<()> = JoinSet::new();
    let mut rooms_of: HashMap<tokio::task::Id, OwnedRoomId> = HashMap::new();
    loop {
        match worker.rooms_with_pending().await {
            Ok(rooms) => {
                for room in rooms {
                    if busy.len() >= cap {
                        break;
                    }
                    if busy.insert(room.clone()) {
                        let worker = worker.clone();
                        let name = room.clone();
                        let handle = workers.spawn(async move {
                            if let Err(e) = worker.drain(&room).await {
                                tracing::warn!(%room, error = %e, "room handling failed; will retry");
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
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => {
                        tracing::error!(error = %e, "a room worker panicked; its room will be retried");
                        e.id()
                    }
                };
                if let Some(room) = rooms_of.remove(&id) {
                    busy.remove(&room);
                }
            }
            () = tokio::time::sleep(TICK) => {}
        }
    }
}
