//! A vote on a poll by a reply with a number (`triggers`): kept as it arrived, for the
//! tally (`polls::count`) to weigh against the member's other votes. It starts no turn:
//! the poll's own votes do not either.

use super::Error;
use super::commands::Commands;
use crate::store::{PollReply, StoredEvent};

impl Commands {
    /// Keeps `event`'s vote for `answer` on poll `poll` (its row); returns its seq, done.
    pub async fn vote(&self, event: &StoredEvent, poll: i64, answer: &str) -> Result<i64, Error> {
        let reply = PollReply {
            event_id: &event.event_id,
            poll_id: poll,
            sender: &event.sender,
            origin_ts: event.origin_ts,
            answer,
        };
        self.store.record_poll_reply(&reply).await?;
        tracing::info!(room = %event.room_id, poll, answer, sender = %event.sender, "a vote by reply");
        Ok(event.seq)
    }
}
