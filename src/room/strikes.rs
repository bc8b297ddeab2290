//! A room's failed steps, and when to give up on an event.
//!
//! A step that fails because something is away (the homeserver, the database, another
//! instance's lease) is waited out and not counted here. Any other failure may be one
//! event that no step can handle (a member's event that the store refuses, a library
//! error on it): retried every few seconds for ever, it would keep everyone in the room
//! from being answered. So after [`CAREFUL_AFTER`] such failures in a row the room is
//! stepped one event at a time, which tells which event fails; after [`GIVE_UP_AFTER`]
//! failures of that event alone it is given up (the worker marks it processed, logs it
//! at WARN and counts it), and the room goes on. Steps stay one event at a time until
//! the room is clear, since the broken event may be further on. Kept in memory: a
//! restart only starts the count again.

use std::collections::HashMap;
use std::sync::Mutex;

use ruma::{OwnedRoomId, RoomId};

/// Failed steps in a row (not outages) after which a room is stepped one event at a time.
pub const CAREFUL_AFTER: u32 = 3;
/// Failed steps on one event, taken alone, after which it is given up.
pub const GIVE_UP_AFTER: u32 = 3;

/// A room's failed steps since its last good one.
#[derive(Debug, Default)]
struct Count {
    failed: u32,
    /// Stepping one event at a time: the event, and how often its step failed.
    head: Option<(i64, u32)>,
}

/// Every room's failed steps.
#[derive(Debug, Default)]
pub struct Strikes {
    rooms: Mutex<HashMap<OwnedRoomId, Count>>,
}

impl Strikes {
    fn rooms(&self) -> std::sync::MutexGuard<'_, HashMap<OwnedRoomId, Count>> {
        self.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `room` is stepped one event at a time.
    pub fn careful(&self, room: &RoomId) -> bool {
        self.rooms().get(room).is_some_and(|c| c.failed >= CAREFUL_AFTER)
    }

    /// A careful step handled its event: the next one is counted afresh.
    pub fn handled_one(&self, room: &RoomId) {
        if let Some(c) = self.rooms().get_mut(room) {
            c.head = None;
        }
    }

    /// A step went well (and the room is clear): forgotten.
    pub fn clear(&self, room: &RoomId) {
        self.rooms().remove(room);
    }

    /// Counts a failed step in `room`, which stepped the event `head` alone if any;
    /// returns the event to give up, once it failed often enough.
    pub fn strike(&self, room: &RoomId, head: Option<i64>) -> Option<i64> {
        let mut rooms = self.rooms();
        let c = rooms.entry(room.to_owned()).or_default();
        c.failed = c.failed.saturating_add(1);
        let seq = head?;
        let n = match c.head {
            Some((h, n)) if h == seq => n + 1,
            _ => 1,
        };
        c.head = Some((seq, n));
        if n < GIVE_UP_AFTER {
            return None;
        }
        rooms.remove(room);
        Some(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_room_turns_careful_after_failures_and_an_event_failing_alone_is_given_up() {
        let strikes = Strikes::default();
        let room = ruma::owned_room_id!("!r:x");
        for _ in 0..CAREFUL_AFTER {
            assert!(!strikes.careful(&room));
            assert_eq!(strikes.strike(&room, None), None, "a whole step failed: no event to blame");
        }
        assert!(strikes.careful(&room));
        // The first event alone goes well; the second fails alone until it is given up.
        strikes.handled_one(&room);
        for _ in 1..GIVE_UP_AFTER {
            assert_eq!(strikes.strike(&room, Some(8)), None);
            assert!(strikes.careful(&room));
        }
        assert_eq!(strikes.strike(&room, Some(8)), Some(8));
        assert!(!strikes.careful(&room), "given up: the room starts afresh");
    }

    #[test]
    fn failures_on_different_events_are_counted_apart_and_a_good_step_forgets_them() {
        let strikes = Strikes::default();
        let room = ruma::owned_room_id!("!r:x");
        for _ in 0..CAREFUL_AFTER {
            strikes.strike(&room, None);
        }
        assert_eq!(strikes.strike(&room, Some(1)), None);
        assert_eq!(strikes.strike(&room, Some(2)), None);
        assert_eq!(strikes.strike(&room, Some(1)), None, "a failure on another event started the count again");
        strikes.clear(&room);
        assert!(!strikes.careful(&room));
    }
}
