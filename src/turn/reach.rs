//! What a turn's tool calls reach: the store, the outbox, the turn's scope, limits and
//! write numbers, and the parts in [`Kit`]. Each feature's call (`tools`, `media`) is a
//! function of a `&Reach`, so the turn's types are extended in their own files only, and
//! a feature sees what a call may use and nothing of the runner's own state (the live
//! answer, whether a call posted).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};

use ruma::{OwnedRoomId, RoomId};

use super::deadline::Deadline;
use super::stop::{Stop, outbox_error};
use super::tools::targets::{self, internal};
use super::{Limits, Scope};
use crate::approval::Approvals;
use crate::mcp::Mcp;
use crate::metrics::Metrics;
use crate::outbox::{Outbox, WriteId};
use crate::store::Store;
use crate::tools::{Offered, RichCall, ToolError, ToolErrorCode};

/// What a turn's tool calls reach beyond the store and the outbox.
pub struct Kit<'a> {
    pub metrics: &'a Metrics,
    /// The tools this turn offers.
    pub offered: &'a Offered,
    pub mcp: &'a Mcp,
    pub approvals: &'a Approvals,
    /// Stopped while a call waits for the asker.
    pub deadline: &'a Deadline,
    /// Uploads what the turn shows (none without it).
    pub media: Option<&'a crate::media::Media>,
    /// Told when a poll with an end is started.
    pub polls: Option<&'a crate::polls::Closer>,
    /// Schedules' bounds and zone, and the ticker told when one is made.
    pub schedules: &'a super::ScheduleKit,
    /// When the newest message the turn answers arrived (richbot's clock, ms): a delay a
    /// schedule call gives counts from it.
    pub asked_at: i64,
}

/// One turn's reach, shared by its tool calls (which may run together).
pub struct Reach<'a> {
    pub store: &'a Store,
    pub outbox: &'a Outbox,
    pub kit: Kit<'a>,
    pub scope: &'a Scope,
    pub turn: i64,
    pub limits: Limits,
    /// The next write's number within the turn (shared with the final answer).
    seq: AtomicI64,
    /// Sends and edits made so far.
    writes: AtomicU32,
    /// The asker refused (or let time out) an approval in this turn: it asks no more.
    pub declined: AtomicBool,
}

impl<'a> Reach<'a> {
    pub fn new(
        store: &'a Store,
        outbox: &'a Outbox,
        kit: Kit<'a>,
        scope: &'a Scope,
        turn: i64,
        limits: Limits,
    ) -> Self {
        Self {
            store,
            outbox,
            kit,
            scope,
            turn,
            limits,
            seq: AtomicI64::new(0),
            writes: AtomicU32::new(0),
            declined: AtomicBool::new(false),
        }
    }

    /// The id of a write made now (the next takes the one after).
    pub fn take_write(&self) -> WriteId {
        WriteId { turn: self.turn, seq: self.seq.fetch_add(1, Ordering::Relaxed) }
    }

    /// The id the turn's next write (its final answer) takes.
    pub fn next_write(&self) -> WriteId {
        WriteId { turn: self.turn, seq: self.seq.load(Ordering::Relaxed) }
    }

    /// Counts a write against the turn's cap, or refuses it past the cap.
    pub(in crate::turn) fn count_write(&self) -> Result<(), ToolError> {
        let limit = self.limits.writes_per_turn;
        match self.writes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| (w < limit).then_some(w + 1)) {
            Ok(_) => Ok(()),
            Err(_) => Err(ToolError::new(
                ToolErrorCode::LimitReached,
                format!("at most {limit} messages and edits per turn; finish with text"),
            )),
        }
    }

    /// Whether `room` is encrypted, as the persona writes to it.
    pub async fn encrypted(&self, room: &RoomId) -> Result<bool, Stop> {
        self.outbox.encrypted(room, &self.scope.persona).await.map_err(outbox_error)
    }

    /// The room a planned call writes to: a send's target, an edit's message's room.
    pub async fn room_of(&self, call: &RichCall) -> Result<OwnedRoomId, Stop> {
        match call {
            RichCall::Send { room, .. } => Ok(targets::resolve(self.store, self.outbox, self.scope, room).await?),
            RichCall::Edit { event_id, .. } => {
                let sent = self.store.sent_message(event_id).await.map_err(internal)?;
                Ok(sent.map_or_else(|| self.scope.room.clone(), |m| m.room_id))
            }
        }
    }
}
