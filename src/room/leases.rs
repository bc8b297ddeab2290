//! Sharing the rooms between instances on one PostgreSQL.
//!
//! The homeserver hands a transaction to whichever instance its load balancer picks, so
//! any instance may store a room's events, and any may be the one to answer them. A room
//! is handled by one instance at a time: the scheduler claims the room's lease
//! (`store::leases`) before a step and gives it back after; a room another instance holds
//! is left to it. While this instance works, [`Leases::keep`] renews its leases every third
//! of `bot.lease_secs`; if it dies, another instance takes its rooms over (resuming a turn
//! it left running, with the same transaction ids, so nothing is posted twice): at once
//! when PostgreSQL saw its connections close (a crash, a kill), else when its leases run
//! out (a hung process, a lost machine or network).
//!
//! Since a room's events may be stored by another instance, or wait for a lease to end,
//! [`Leases::keep`] also asks the database every second (at most) for rooms with work
//! that no live lease covers, and queues them here.
//!
//! On SQLite there is one process and no leases: the queue alone decides.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use rand::distr::{Alphanumeric, SampleString};
use ruma::RoomId;

use crate::clock::now_ms;
use crate::queue::RoomQueue;
use crate::store::{self, Held, Store};

/// How often the database is asked for work no live instance holds (at most; a shorter
/// lease polls as often as it renews).
const POLL: Duration = Duration::from_secs(1);

/// This instance's leases.
#[derive(Debug, Clone)]
pub struct Leases {
    store: Store,
    /// This process, as lease rows name it: host, pid and a random part (a pid can come
    /// back after a restart, in a container always).
    holder: Arc<str>,
    /// This process's `serve` lock on PostgreSQL, and its backend (0: none), which the
    /// leases name: they end with it. Taken again if PostgreSQL drops it (a server
    /// restart), or every lease would look dead to the other instances.
    serving: Arc<tokio::sync::Mutex<Option<Held>>>,
    session: Arc<AtomicI64>,
    lease: Duration,
}

impl Leases {
    pub fn new(store: Store, lease: Duration, serving: Option<Held>) -> Self {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_owned());
        let nonce = Alphanumeric.sample_string(&mut rand::rng(), 6);
        let holder = format!("{host}/{}/{nonce}", std::process::id()).into();
        let session = Arc::new(AtomicI64::new(serving.as_ref().map_or(0, Held::session)));
        Self { store, holder, serving: Arc::new(tokio::sync::Mutex::new(serving)), session, lease }
    }

    /// The PostgreSQL backend the leases name now.
    pub fn session(&self) -> Option<i64> {
        Some(self.session.load(Ordering::Relaxed)).filter(|s| *s != 0)
    }

    /// Takes the `serve` lock again if its connection is gone, and moves the leases to
    /// the new session.
    async fn keep_serving(&self) {
        let Some(session) = self.session() else { return };
        match self.store.session_alive(session).await {
            Ok(true) | Err(_) => {}
            Ok(false) => match self.store.serving().await {
                Ok(Some(held)) => {
                    // The leases name the new session before anyone is told of it.
                    let new = held.session();
                    if let Err(e) = self.store.renew_leases(&self.holder, Some(new), now_ms(), self.lease_ms()).await {
                        tracing::warn!(error = %e, "could not move the room leases to the new session; retrying");
                        return;
                    }
                    tracing::warn!(old = session, new, "the serve lock's connection was lost; taken again");
                    self.session.store(new, Ordering::Relaxed);
                    *self.serving.lock().await = Some(held);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "the serve lock's connection was lost; retrying"),
            },
        }
    }

    /// How this instance is named in the lease rows.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The personas' crypto leases are named and kept like the rooms'.
    pub fn crypto_sharing(&self) -> crate::crypto::Sharing {
        crate::crypto::Sharing { holder: self.holder.clone(), session: self.session.clone(), lease: self.lease }
    }

    fn lease_ms(&self) -> i64 {
        crate::clock::ms(self.lease)
    }

    /// Claims `room` for a step; false when another live instance has it.
    pub async fn claim(&self, room: &RoomId) -> Result<bool, store::Error> {
        self.store.claim_room(room, &self.holder, self.session(), now_ms(), self.lease_ms()).await
    }

    /// Gives `room` back after a step. A failure only means the lease runs out by itself.
    pub async fn release(&self, room: &RoomId) {
        if let Err(e) = self.store.release_room(room, &self.holder).await {
            tracing::warn!(%room, error = %e, "could not give a room lease back; it runs out by itself");
        }
    }

    /// Gives every room back (stopping), so other instances need not wait for the leases.
    pub async fn release_all(&self) {
        match self.store.release_all(&self.holder).await {
            Ok(n) => tracing::info!(leases = n, holder = %self.holder, "room leases given back"),
            Err(e) => tracing::warn!(error = %e, "could not give the room leases back; they run out by themselves"),
        }
    }

    /// Renews this instance's leases and queues rooms with work no live instance holds,
    /// until dropped.
    pub async fn keep(&self, queue: Arc<RoomQueue>) {
        let renew_every = self.lease / 3;
        let mut ticks = tokio::time::interval(POLL.min(renew_every));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut renewed = tokio::time::Instant::now();
        loop {
            ticks.tick().await;
            self.keep_serving().await;
            if renewed.elapsed() >= renew_every {
                match self.store.renew_leases(&self.holder, self.session(), now_ms(), self.lease_ms()).await {
                    Ok(_) => renewed = tokio::time::Instant::now(),
                    Err(e) => tracing::warn!(error = %e, "could not renew the room leases; retrying"),
                }
            }
            match self.store.unleased_work(now_ms()).await {
                Ok(rooms) if !rooms.is_empty() => queue.push(rooms),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not look for rooms with work; retrying"),
            }
        }
    }
}
