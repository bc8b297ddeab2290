//! A picture, then its question. Element and other clients send a picture and the words
//! about it as two messages, the words a second or two later. A member's picture or file
//! that would start a turn alone waits `bot.coalesce_ms` (from its arrival) for their
//! next words: what arrives in that window is one turn with them, so the model sees the
//! picture beside the question. A picture alone still gets its turn when the window has
//! passed: the room is stepped again then. A voice message is a question whole, and
//! never waits.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ruma::RoomId;
use serde_json::Value;

use crate::queue::RoomQueue;
use crate::store::StoredEvent;

/// How long pictures wait for their words, and the queue that steps their room again.
#[derive(Debug, Default)]
pub struct Coalesce {
    window_ms: i64,
    queue: OnceLock<Arc<RoomQueue>>,
}

impl Coalesce {
    pub fn new(window_ms: u64) -> Self {
        Self { window_ms: i64::try_from(window_ms).unwrap_or(i64::MAX), queue: OnceLock::new() }
    }

    /// Steps a waiting room again through `queue` when its window has passed.
    pub fn wake_through(&self, queue: Arc<RoomQueue>) {
        let _ = self.queue.set(queue);
    }

    /// Whether a turn of `events` (one asker's) waits for more words at `now` (ms): all of
    /// them pictures or files, the latest within the window. `room` is stepped again at
    /// the window's end.
    pub fn waits<'a>(&self, room: &RoomId, events: impl IntoIterator<Item = &'a StoredEvent>, now: i64) -> bool {
        let Some(queue) = self.queue.get().filter(|_| self.window_ms > 0) else { return false };
        let mut latest = None;
        for e in events {
            if !is_media(e) {
                return false;
            }
            latest = latest.max(Some(e.received_at));
        }
        let Some(due) = latest.map(|at| at.saturating_add(self.window_ms)).filter(|due| now < *due) else {
            return false;
        };
        let (queue, room, wait) = (queue.clone(), room.to_owned(), Duration::from_millis((due - now) as u64));
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            queue.push([room]);
        });
        true
    }
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
}
