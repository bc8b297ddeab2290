//! The room stage: what happens to a room's events once they are in the inbox.
//!
//! - `scheduler`: rooms with pending events (queued by the inbox), served round-robin, in
//!   parallel up to a cap; a room gets one turn, then waits its turn.
//! - `worker`: one step in one room, in arrival order: resumes a turn a crash cut short,
//!   applies member events, triages messages and reactions, and hands the first asker's
//!   batch to the turn stage.
//! - `facts`: the store lookups triage needs (membership, our sent messages, threads,
//!   posted buttons), all scoped to the event's room.
//! - `triggers`: the pure decision "does this event start a turn, and why".
//! - `limiter`: turn rate limits per room and per asker, and the cool-down they trip.
//! - `command` (pure: what a command is) and `commands` (answering it): `!help`,
//!   `!reset`, `!mode`, `!usage`, answered without the model; `votes`: a vote on a poll
//!   by a reply with a number, kept for the tally.
//! - `membership`: invites, joins, leaves, greetings.
//! - `occurrences`: a schedule's occurrence in the inbox: its persona, if its asker may
//!   still have it (else the schedule stops, and why is logged).
//! - `decrypt`: encrypted events made clear (or set aside for their key) before the rest
//!   of a step sees them.
//! - `leases`: several instances on one PostgreSQL: a room is handled by one at a time.
//! - `coalesce`: a picture or file waits a moment for its sender's words, one turn.
//! - `strikes`: a room whose steps keep failing is stepped one event at a time, and the
//!   event that keeps failing is given up.
//!
//! Nothing here calls the LLM; everything that does is in `turn`.

mod admission;
mod command_syntax;
mod coalesce;
mod commands;
mod decrypt;
mod facts;
mod leases;
mod limiter;
mod membership;
mod occurrences;
mod power;
mod redaction;
mod schedule_commands;
mod scheduler;
mod strikes;
pub mod triggers;
mod verification;
mod votes;
mod worker;

use std::sync::Arc;

use crate::matrix;
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::personas::{self, Personas};
use crate::queue::RoomQueue;
use crate::store::{self, Store};
use crate::turn::Turns;

pub use admission::Admission;
pub use coalesce::MAX_WINDOW_MS as MAX_COALESCE_MS;
pub use facts::{Policy, Rates};
pub use leases::Leases;
pub use scheduler::Stop;

/// A failure that leaves the room's batch pending, to be retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Store(#[from] store::Error),
    #[error("homeserver: {0}")]
    Matrix(#[from] matrix::Error),
    #[error("persona: {0}")]
    Persona(#[from] personas::Error),
    #[error("turn: {0}")]
    Turn(#[from] crate::turn::Error),
    #[error("crypto: {0}")]
    Crypto(#[from] crate::crypto::Error),
}

impl Error {
    /// Whether the step failed because something it needs is away (the homeserver, the
    /// database, another instance holding a lease): waited out, never held against the
    /// room's events. Anything else may be an event no step can handle, which the worker
    /// gives up after a few tries.
    pub fn is_outage(&self) -> bool {
        use crate::crypto::Error as C;
        let matrix = |e: &matrix::Error| !matches!(e, matrix::Error::Refused { .. });
        match self {
            Error::Store(e) | Error::Persona(personas::Error::Store(e)) => e.is_outage(),
            Error::Matrix(e) | Error::Persona(personas::Error::Matrix(e)) => matrix(e),
            Error::Turn(crate::turn::Error::Suspended(_)) => true,
            Error::Turn(crate::turn::Error::Store(e)) => e.is_outage(),
            Error::Crypto(C::Matrix(e)) => matrix(e),
            Error::Crypto(C::Store(e) | C::State(crate::crypto::StateError::Store(e))) => e.is_outage(),
            Error::Crypto(C::NotReady(_) | C::Busy(_) | C::Fenced(_)) => true,
            Error::Crypto(_) => false,
        }
    }
}

/// What the room stage is built from.
#[derive(Debug)]
pub struct Deps {
    worker: worker::Worker,
    leases: Option<Leases>,
}

impl Deps {
    pub fn new(
        store: Store,
        matrix: matrix::Client,
        personas: Personas,
        outbox: Outbox,
        turns: Turns,
        policy: Policy,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (r, coalesce_ms) = (&policy.rates, policy.coalesce_ms);
        let limiter =
            limiter::Limiter::new(r.per_room_per_minute, r.per_asker_per_minute, r.cooldown_secs, r.exempt.clone());
        let triage = facts::Triage::new(store.clone(), personas.clone(), policy.clone());
        let commands = commands::Commands::new(store.clone(), matrix.clone(), personas.clone());
        let membership = membership::Membership::new(store.clone(), matrix, personas, outbox, policy);
        let mut worker = worker::Worker::new(store, triage, membership, commands, turns, limiter, metrics);
        worker.coalesce = coalesce::Coalesce::new(coalesce_ms);
        Self { worker, leases: None }
    }

    /// Decrypts encrypted rooms' events with `crypto` (else a persona says it cannot
    /// read them).
    pub fn with_crypto(mut self, crypto: Option<crate::crypto::Crypto>, personas: Personas, policy: Policy) -> Self {
        self.worker.membership.crypto = crypto.clone();
        self.worker.decrypter = crypto.map(|crypto| {
            let store = self.worker.store().clone();
            decrypt::Decrypter { crypto, store, personas, policy }
        });
        self
    }

    /// Asks `clients` (the agents' channel) whether a client's schedule may still post
    /// when it comes due.
    pub fn with_clients(mut self, clients: Option<Arc<dyn crate::schedules::ClientRooms>>) -> Self {
        self.worker.triage.clients = clients;
        self
    }

    /// Shares the rooms with other instances on the same database through `leases`: a
    /// room is stepped only under its lease, and any room may hold a turn another
    /// instance left running.
    pub fn sharing(self, leases: Leases) -> Self {
        Self { worker: self.worker.shared(), leases: Some(leases) }
    }

    /// Runs the scheduler until `stop` (then running turns get its grace) or the task is
    /// dropped: takes rooms from `queue`, at most `cap` at once.
    pub async fn run(self, queue: Arc<RoomQueue>, cap: usize, stop: scheduler::Stop) {
        self.worker.coalesce.wake_through(queue.clone());
        scheduler::run(Arc::new(self.worker), queue, cap, stop, self.leases).await;
    }
}
