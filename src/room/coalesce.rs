//! A picture, then its question. Element and other clients send a picture and the words
//! about it as two messages, the words a second or two later. A member's picture or file
//! that would start a turn alone waits `bot.coalesce_ms` for their next words: what
//! arrives in that window is one turn with them, so the model sees the picture beside the
//! question. A picture alone still gets its turn when the window has passed: the room is
//! stepped again then. A voice message is a question whole, and never waits.
//!
//! Waiting holds no one else up, whatever one member sends:
//! - the window counts from the first waiting picture, so more pictures never stretch it
//!   (a picture every 2 s held another member's question for 42 s when each one restarted
//!   the window), and `bot.coalesce_ms` is at most [`MAX_WINDOW_MS`], a minute;
//! - the wait is the asker's alone: the worker goes on to other askers' batches meanwhile;
//! - each waiting picture is counted against its asker's turn bucket when it first waits
//!   ([`Coalesce::paid`]), so a flood of pictures trips the asker's limit as a flood of
//!   questions does, and the turn they end up in is not counted again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ruma::RoomId;
use serde_json::Value;

use crate::queue::RoomQueue;
use crate::store::StoredEvent;

/// The longest a picture may wait for its words (`bot.coalesce_ms`, checked at start).
pub const MAX_WINDOW_MS: u64 = 60_000;

/// How long pictures wait for their words, and the queue that steps their room again.
#[derive(Debug, Default)]
pub struct Coalesce {
    window_ms: i64,
    queue: OnceLock<Arc<RoomQueue>>,
    /// Waiting pictures already counted against their asker's bucket, by seq.
    paid: Mutex<HashSet<i64>>,
}

impl Coalesce {
    pub fn new(window_ms: u64) -> Self {
        let window_ms = i64::try_from(window_ms.min(MAX_WINDOW_MS)).unwrap_or(0);
        Self { window_ms, queue: OnceLock::new(), paid: Mutex::default() }
    }

    /// Steps a waiting room again through `queue` when its window has passed.
    pub fn wake_through(&self, queue: Arc<RoomQueue>) {
        let _ = self.queue.set(queue);
    }

    /// Whether a turn of `events` (one asker's) waits for more words at `now` (ms): all of
    /// them pictures or files, the first within the window. `room` is stepped again at
    /// the window's end.
    pub fn waits<'a>(&self, room: &RoomId, events: impl IntoIterator<Item = &'a StoredEvent>, now: i64) -> bool {
        let Some(queue) = self.queue.get().filter(|_| self.window_ms > 0) else { return false };
        let mut first = None;
        for e in events {
            if !is_media(e) {
                return false;
            }
            first = Some(first.map_or(e.received_at, |f: i64| f.min(e.received_at)));
        }
        let Some(due) = first.map(|at| at.saturating_add(self.window_ms)).filter(|due| now < *due) else {
            return false;
        };
        let (queue, room, wait) = (queue.clone(), room.to_owned(), Duration::from_millis((due - now) as u64));
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            queue.push([room]);
        });
        true
    }

    /// Whether the waiting picture `seq` was counted against its asker's bucket already;
    /// counts it from now on if not (the caller asks the limiter).
    pub fn paid(&self, seq: i64) -> bool {
        !lock(&self.paid).insert(seq)
    }

    /// Whether any of `seqs` was counted while it waited (the turn they make together is
    /// then not counted again); forgets them.
    pub fn settle(&self, seqs: &[i64]) -> bool {
        let mut paid = lock(&self.paid);
        seqs.iter().fold(false, |any, seq| paid.remove(seq) | any)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A picture or a file (a sticker is a picture).
fn is_media(event: &StoredEvent) -> bool {
    let msgtype = event.content().get("msgtype").and_then(Value::as_str);
    event.event_type == "m.sticker"
        || (event.event_type == "m.room.message" && matches!(msgtype, Some("m.image" | "m.file")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: i64, content: Value, received_at: i64) -> StoredEvent {
        StoredEvent {
            seq,
            event_id: ruma::OwnedEventId::try_from(format!("$e{seq}")).expect("id"),
            room_id: ruma::owned_room_id!("!r:x"),
            sender: ruma::owned_user_id!("@alice:x"),
            event_type: "m.room.message".into(),
            state_key: None,
            origin_ts: received_at,
            received_at,
            event: json!({"content": content}),
            processed: false,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_picture_waits_for_its_words_and_its_room_is_stepped_again_when_the_window_ends() {
        let room = ruma::room_id!("!r:x");
        let queue = Arc::new(RoomQueue::default());
        let coalesce = Coalesce::new(3_000);
        coalesce.wake_through(queue.clone());
        let picture = event(1, json!({"msgtype": "m.image", "body": "cat.png", "url": "mxc://x/c"}), 10_000);
        let words = event(2, json!({"msgtype": "m.text", "body": "what is this?"}), 11_000);
        assert!(!coalesce.waits(room, [&picture, &words], 11_000), "its words came: one turn now");
        assert!(!coalesce.waits(room, [&picture], 13_000), "the window has passed: the picture alone");
        let voice = event(3, json!({"msgtype": "m.audio", "body": "Voice message.ogg", "url": "mxc://x/v"}), 10_000);
        assert!(!coalesce.waits(room, [&voice], 11_000), "a voice message is its own question: no wait");
        assert!(coalesce.waits(room, [&picture], 11_000), "within the window it waits");
        assert!(queue.take(1, |_| true).is_empty(), "not stepped before the window ends");
        tokio::time::sleep(std::time::Duration::from_millis(2_001)).await;
        assert_eq!(queue.take(1, |_| true), [room.to_owned()], "stepped again when it ends");
        let off = Coalesce::new(0);
        off.wake_through(queue);
        assert!(!off.waits(room, [&picture], 11_000), "0: no wait");
    }

    #[tokio::test(start_paused = true)]
    async fn more_pictures_do_not_stretch_the_window_and_each_is_counted_once() {
        let room = ruma::room_id!("!r:x");
        let coalesce = Coalesce::new(3_000);
        coalesce.wake_through(Arc::new(RoomQueue::default()));
        let picture = |seq, at| event(seq, json!({"msgtype": "m.image", "body": "p.png", "url": "mxc://x/p"}), at);
        let (first, second, third) = (picture(1, 10_000), picture(2, 12_000), picture(3, 12_900));
        assert!(coalesce.waits(room, [&first, &second, &third], 12_950), "within the first picture's window");
        assert!(!coalesce.waits(room, [&first, &second, &third], 13_000), "its window is over, whatever came since");
        assert!(!coalesce.paid(1) && coalesce.paid(1), "counted when it first waits, then known");
        assert!(!coalesce.paid(2));
        assert!(coalesce.settle(&[1, 2, 3]), "the turn of counted pictures is not counted again");
        assert!(!coalesce.settle(&[1, 2, 3]), "and forgotten");
        assert!(!coalesce.paid(3) && !coalesce.settle(&[4]));
    }
}
