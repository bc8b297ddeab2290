//! Which write a write is: its id (fixed by its turn, or by an agent client's call,
//! before its first attempt) and where it goes.

use ruma::{RoomId, UserId};

/// Where poll ends' write numbers start, below zero (agent clients' calls are above it).
pub const POLL_BASE: i64 = 1 << 40;

/// The n-th write (`seq`) of a turn: what its transaction id is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteId {
    pub turn: i64,
    pub seq: i64,
}

impl WriteId {
    /// The write of an agent client's call (its ledger row `request`): numbered apart
    /// from the turns' writes, as turn `-request`, and with no room lease to hold.
    pub fn agent(request: i64) -> Self {
        Self { turn: -request, seq: 0 }
    }

    /// The end of poll `poll` (its row): numbered below every agent client's call, and
    /// the same whichever turn or timer ends it, so it is sent once.
    pub fn poll_end(poll: i64) -> Self {
        Self { turn: -(POLL_BASE + poll), seq: 0 }
    }

    /// The message that says poll `poll`'s result, sent after its end.
    pub fn poll_result(poll: i64) -> Self {
        Self { seq: 1, ..Self::poll_end(poll) }
    }

    /// Its transaction id on this `instance`.
    pub(super) fn txn_id(&self, instance: &str) -> String {
        match self.turn {
            t if t <= -POLL_BASE => format!("rb.{instance}.p{}.{}", -t - POLL_BASE, self.seq),
            t if t < 0 => format!("rb.{instance}.a{}.{}", -t, self.seq),
            t => format!("rb.{instance}.{t}.{}", self.seq),
        }
    }
}

/// One write: which, and as whom, where.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    pub id: WriteId,
    pub room: &'a RoomId,
    pub persona: &'a UserId,
}
