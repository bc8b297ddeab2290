//! Ending polls: at their `end_after_secs` (the closer, a task that sleeps until the next
//! poll is due, woken early when a poll is started), or when the model is asked to
//! (`rich_poll_end`). Either way the end is one write, `WriteId::poll_end`, whose
//! transaction id is the poll's: a timer and a turn that race, or a restart mid-way, send
//! it once. The end event says the result in words; the tally is the votes the room holds
//! (poll responses and votes by reply). Then the result is posted as a message, a reply
//! to the poll's own message, for clients that draw no polls (`WriteId::poll_result`).
//! Both are sent as tallies: a retry states the votes as they are then.

use std::sync::Arc;
use std::time::Duration;

use ruma::OwnedEventId;
use tokio::sync::Notify;

use super::{end_content, tally, vote_of};
use crate::clock::now_ms;
use crate::outbox::{self, Outbox, Write, WriteId};
use crate::render;
use crate::store::{PollRow, Store};

/// The closer sleeps at most this long between looks (a poll another instance started
/// is found then).
const LOOK_EVERY: Duration = Duration::from_secs(60);
/// How long one instance holds a poll's ending before another may try.
const CLAIM_MS: i64 = 120_000;

/// Wakes the closer when a poll with an end is started in this process.
#[derive(Debug, Clone, Default)]
pub struct Closer {
    wake: Arc<Notify>,
}

/// The votes on `poll` as the room holds them, counted until now or its end.
pub async fn count(store: &Store, poll: &PollRow) -> Result<super::Tally, crate::store::Error> {
    let votes: Vec<(String, i64, Vec<String>)> = store
        .poll_responses(&poll.room_id, &poll.event_id, poll.created_at, poll.ended_at)
        .await?
        .into_iter()
        .filter_map(|(ty, sender, at, content)| Some((sender, at, vote_of(&ty, &content, poll.event_id.as_str())?)))
        .chain(
            store
                .poll_reply_votes(poll.id, poll.created_at, poll.ended_at)
                .await?
                .into_iter()
                .map(|(sender, at, answer)| (sender, at, vec![answer])),
        )
        .collect();
    Ok(tally(&poll.answers, poll.created_at, poll.ended_at, &votes))
}

/// Ends `poll` (as its persona, once), recording when; the end event and the result it
/// states.
pub async fn end(store: &Store, outbox: &Outbox, poll: &PollRow) -> Result<(OwnedEventId, String), outbox::Error> {
    let tally = count(store, poll).await?;
    let result = tally.result();
    let content = end_content(poll.event_id.as_str(), &result);
    let write = Write { id: WriteId::poll_end(poll.id), room: &poll.room_id, persona: &poll.persona };
    let id = outbox.send_tally(&write, super::END, &content).await?;
    let counts: Vec<(String, usize)> = tally.counts.iter().map(|(a, v)| (a.clone(), v.len())).collect();
    let message = render::result_message(&poll.question, &counts, &result, poll.text_event_id.as_deref());
    let write = Write { id: WriteId::poll_result(poll.id), ..write };
    outbox.send_tally(&write, "m.room.message", &message).await?;
    store.poll_ended(poll.id, now_ms()).await?;
    tracing::info!(poll = %poll.event_id, room = %poll.room_id, result, "poll ended");
    Ok((id, result))
}

impl Closer {
    /// A poll with an end was started: look again now.
    pub fn started(&self) {
        self.wake.notify_one();
    }

    /// Ends due polls until the process stops.
    pub async fn run(self, store: Store, outbox: Outbox) {
        loop {
            let now = now_ms();
            match store.due_polls(now).await {
                Ok(due) => {
                    for poll in due {
                        match store.claim_poll_end(poll.id, now, now + CLAIM_MS).await {
                            Ok(true) => {}
                            Ok(false) => continue,
                            Err(e) => {
                                tracing::warn!(error = %e, "could not claim a poll's end; trying later");
                                continue;
                            }
                        }
                        if let Err(e) = end(&store, &outbox, &poll).await {
                            tracing::warn!(poll = %poll.event_id, error = %e, "could not end a poll; trying again");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not read the polls due; trying later"),
            }
            let next = store.next_poll_end().await.ok().flatten();
            // A failed end is tried again after a pause, not in a busy loop.
            let wait = crate::clock::sleep_for(next, LOOK_EVERY, Duration::from_millis(500));
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
            }
        }
    }
}
