//! Which write a write is: its id (fixed by its turn, or by an agent client's call,
//! before its first attempt) and where it goes.

use ruma::{RoomId, UserId};

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

    /// Its transaction id on this `instance`.
    pub(super) fn txn_id(&self, instance: &str) -> String {
        match self.turn {
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
