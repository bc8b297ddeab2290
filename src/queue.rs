//! The rooms with work waiting: filled by the inbox, emptied by the scheduler.
//!
//! The inbox pushes a room when it commits events a worker must handle; the scheduler
//! takes rooms in the order they were pushed (a room that is busy, or backing off after a
//! failure, stays queued in its place) and pushes a room back after a step that left
//! events pending, so rooms are served round-robin. No query runs to find work: the
//! store is asked once, at start, for the rooms a crash left with pending events.
//!
//! It also holds the rooms *watched* (a persona has, or had, a membership there, or events
//! wait) and the rooms *active* (events wait, or a worker has them in hand): what the
//! inbox's door needs to settle an event without a worker (see `inbox::door`).

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use ruma::{OwnedRoomId, RoomId};
use tokio::sync::Notify;

/// Rooms waiting for a worker, and the rooms watched.
#[derive(Debug, Default)]
pub struct RoomQueue {
    inner: Mutex<Inner>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    order: VecDeque<OwnedRoomId>,
    queued: HashSet<OwnedRoomId>,
    watched: HashSet<OwnedRoomId>,
    active: HashSet<OwnedRoomId>,
}

impl RoomQueue {
    /// A queue holding `pending` (in that order) and watching `watched` and `pending`.
    pub fn new(watched: impl IntoIterator<Item = OwnedRoomId>, pending: Vec<OwnedRoomId>) -> Self {
        let queue = Self::default();
        {
            let mut inner = queue.lock();
            inner.watched.extend(watched);
            inner.watched.extend(pending.iter().cloned());
            inner.active.extend(pending.iter().cloned());
        }
        queue.push(pending);
        queue
    }

    /// Whether a worker must see this room's events.
    pub fn watched(&self, room: &RoomId) -> bool {
        self.lock().watched.contains(room)
    }

    /// The rooms watched now.
    pub fn watched_rooms(&self) -> Vec<OwnedRoomId> {
        self.lock().watched.iter().cloned().collect()
    }

    /// From now on, every event of `room` goes to a worker.
    pub fn watch(&self, room: &RoomId) {
        let mut inner = self.lock();
        if !inner.watched.contains(room) {
            inner.watched.insert(room.to_owned());
        }
    }

    /// Whether events of `room` wait, or are in a worker's hands.
    pub fn is_active(&self, room: &RoomId) -> bool {
        self.lock().active.contains(room)
    }

    /// Events of `room` are on their way to a worker.
    pub fn activate(&self, room: &RoomId) {
        let mut inner = self.lock();
        if !inner.active.contains(room) {
            inner.active.insert(room.to_owned());
        }
    }

    /// A step left `room` with nothing pending: idle, unless events came meanwhile (then
    /// it is queued again, and stays active).
    pub fn idle(&self, room: &RoomId) {
        let mut inner = self.lock();
        if !inner.queued.contains(room) {
            inner.active.remove(room);
        }
    }

    /// Queues rooms (those queued already keep their place; each becomes active) and wakes
    /// the scheduler.
    pub fn push(&self, rooms: impl IntoIterator<Item = OwnedRoomId>) {
        let mut added = false;
        {
            let mut inner = self.lock();
            for room in rooms {
                // Queued is active: the door must not settle what would overtake it.
                if !inner.active.contains(&room) {
                    inner.active.insert(room.clone());
                }
                if inner.queued.insert(room.clone()) {
                    inner.order.push_back(room);
                    added = true;
                }
            }
        }
        if added {
            self.wake.notify_one();
        }
    }

    /// Takes up to `max` rooms, first queued first, that `ready` accepts; the others keep
    /// their place.
    pub fn take(&self, max: usize, mut ready: impl FnMut(&RoomId) -> bool) -> Vec<OwnedRoomId> {
        let mut inner = self.lock();
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(inner.order.len());
        while let Some(room) = inner.order.pop_front() {
            if taken.len() < max && ready(&room) {
                inner.queued.remove(&room);
                taken.push(room);
            } else {
                kept.push_back(room);
            }
            if taken.len() == max {
                break;
            }
        }
        kept.append(&mut inner.order);
        inner.order = kept;
        taken
    }

    /// How many rooms are queued.
    pub fn len(&self) -> usize {
        self.lock().order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves when rooms were pushed since the last call.
    pub async fn pushed(&self) {
        self.wake.notified().await;
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(n: u32) -> OwnedRoomId {
        format!("!r{n}:example.org").try_into().expect("room id")
    }

    #[test]
    fn rooms_are_taken_in_order_and_a_busy_room_keeps_its_place() {
        let q = RoomQueue::new([], vec![room(1), room(2), room(3)]);
        q.push([room(2), room(4)]);
        assert_eq!(q.len(), 4, "a queued room is queued once");
        let busy = room(1);
        assert_eq!(q.take(2, |r| r != busy), vec![room(2), room(3)]);
        assert_eq!(q.take(10, |_| true), vec![room(1), room(4)], "the busy room kept its place, first");
        assert!(q.is_empty());
        q.push([room(3)]);
        assert_eq!(q.take(10, |_| true), vec![room(3)], "taken rooms can be queued again");
    }

    #[test]
    fn pending_rooms_are_watched_and_active_until_a_step_leaves_them_idle() {
        let q = RoomQueue::new([room(1)], vec![room(2)]);
        assert!(q.watched(&room(1)) && q.watched(&room(2)) && !q.watched(&room(3)));
        q.watch(&room(3));
        assert!(q.watched(&room(3)));
        assert!(q.is_active(&room(2)) && !q.is_active(&room(1)));
        assert_eq!(q.take(1, |_| true), [room(2)]);
        q.push([room(2)]); // more events came while the step ran
        q.idle(&room(2));
        assert!(q.is_active(&room(2)), "queued again: still active");
        assert_eq!(q.take(1, |_| true), [room(2)]);
        q.idle(&room(2));
        assert!(!q.is_active(&room(2)));
    }
}
