//! Turn rate limits, so that no bot (another richbot, an echo bot) can keep a persona in a
//! loop and no member can flood it: a token bucket per room and one per asker, each
//! holding `n` turns and refilled at `n` per minute. When a bucket runs dry, its room (or
//! asker) cools down for `cooldown`: the worker posts one notice saying so, and nothing
//! that arrives meanwhile is answered, then or later.
//!
//! Kept in memory on purpose: it bounds bursts, which a restart does not help anyone
//! make; the budgets that must survive restarts are in the store.

use std::collections::HashMap;
use std::sync::Mutex;

use regex::Regex;
use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};

/// What the limiter says about one more turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Go,
    /// The room or the asker is cooling down after a bucket ran dry: no answer, no notice.
    Cooling,
    /// This turn ran a bucket dry: say so once, then cool down until `until`.
    Tripped {
        who: Who,
        until: i64,
    },
}

/// Whose bucket ran dry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    Room,
    Asker,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: i64,
}

impl Bucket {
    /// Refills at `per_minute` tokens a minute, up to `per_minute`.
    fn refill(&mut self, per_minute: u32, now: i64) {
        let cap = f64::from(per_minute);
        let elapsed = (now - self.at).max(0) as f64;
        self.tokens = (self.tokens + elapsed * cap / 60_000.0).min(cap);
        self.at = now;
    }
}

#[derive(Debug, Default)]
struct State {
    rooms: HashMap<OwnedRoomId, Bucket>,
    askers: HashMap<OwnedUserId, Bucket>,
    cooling_rooms: HashMap<OwnedRoomId, i64>,
    cooling_askers: HashMap<OwnedUserId, i64>,
}

/// The buckets and cool-downs of every room and asker.
#[derive(Debug)]
pub struct Limiter {
    per_room: u32,
    per_asker: u32,
    cooldown_ms: i64,
    exempt: Vec<Regex>,
    state: Mutex<State>,
}

/// Entries kept before idle ones (full bucket, not cooling) are dropped.
const PRUNE_AT: usize = 10_000;

impl Limiter {
    /// `exempt`: askers without a bucket of their own (the room's still applies).
    pub fn new(per_room: u32, per_asker: u32, cooldown_secs: u64, exempt: Vec<Regex>) -> Self {
        let cooldown_ms = i64::try_from(cooldown_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        Self { per_room, per_asker, cooldown_ms, exempt, state: Mutex::new(State::default()) }
    }

    pub fn exempt(&self, user: &UserId) -> bool {
        self.exempt.iter().any(|re| re.is_match(user.as_str()))
    }

    /// Takes one turn from the room's and the asker's buckets at `now`, if both have one.
    pub fn admit(&self, room: &RoomId, asker: &UserId, now: i64) -> Admit {
        let mut guard = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = &mut *guard;
        let exempt = self.exempt(asker);
        let cooling = |until: Option<&i64>| until.is_some_and(|u| *u > now);
        if cooling(s.cooling_rooms.get(room)) || (!exempt && cooling(s.cooling_askers.get(asker))) {
            return Admit::Cooling;
        }
        if s.rooms.len() + s.askers.len() > PRUNE_AT {
            let (room_cap, asker_cap) = (f64::from(self.per_room), f64::from(self.per_asker));
            s.rooms.retain(|_, b| {
                b.refill(self.per_room, now);
                b.tokens < room_cap
            });
            s.askers.retain(|_, b| {
                b.refill(self.per_asker, now);
                b.tokens < asker_cap
            });
            s.cooling_rooms.retain(|_, until| *until > now);
            s.cooling_askers.retain(|_, until| *until > now);
        }
        let full = |n: u32| Bucket { tokens: f64::from(n), at: now };
        let room_bucket = s.rooms.entry(room.to_owned()).or_insert_with(|| full(self.per_room));
        room_bucket.refill(self.per_room, now);
        let until = now.saturating_add(self.cooldown_ms);
        if room_bucket.tokens < 1.0 {
            s.cooling_rooms.insert(room.to_owned(), until);
            return Admit::Tripped { who: Who::Room, until };
        }
        if !exempt {
            let asker_bucket = s.askers.entry(asker.to_owned()).or_insert_with(|| full(self.per_asker));
            asker_bucket.refill(self.per_asker, now);
            if asker_bucket.tokens < 1.0 {
                s.cooling_askers.insert(asker.to_owned(), until);
                return Admit::Tripped { who: Who::Asker, until };
            }
            asker_bucket.tokens -= 1.0;
        }
        if let Some(b) = s.rooms.get_mut(room) {
            b.tokens -= 1.0;
        }
        Admit::Go
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruma::{room_id, user_id};

    const MIN: i64 = 60_000;

    #[test]
    fn a_room_gets_its_bucket_then_one_trip_then_silence_until_the_cooldown_ends() {
        let l = Limiter::new(3, 100, 300, Vec::new());
        let (room, bot) = (room_id!("!r:x"), user_id!("@echo:x"));
        let got: Vec<Admit> = (0..6).map(|i| l.admit(room, bot, i)).collect();
        let until = 3 + 300_000;
        assert_eq!(
            got,
            [Admit::Go, Admit::Go, Admit::Go, Admit::Tripped { who: Who::Room, until }, Admit::Cooling, Admit::Cooling]
        );
        assert_eq!(l.admit(room_id!("!other:x"), bot, 10), Admit::Go, "other rooms are not affected");
        assert_eq!(l.admit(room, bot, until - 1), Admit::Cooling);
        assert_eq!(l.admit(room, bot, until), Admit::Go, "cooled down, and refilled meanwhile");
    }

    #[test]
    fn buckets_refill_at_their_rate_per_minute() {
        let l = Limiter::new(2, 100, 1, Vec::new());
        let (room, user) = (room_id!("!r:x"), user_id!("@a:x"));
        assert_eq!(l.admit(room, user, 0), Admit::Go);
        assert_eq!(l.admit(room, user, 0), Admit::Go);
        // Half a minute refills one of two.
        assert_eq!(l.admit(room, user, MIN / 2), Admit::Go);
        assert!(matches!(l.admit(room, user, MIN / 2), Admit::Tripped { who: Who::Room, .. }));
    }

    #[test]
    fn an_asker_has_a_bucket_across_rooms_unless_exempt() {
        let l = Limiter::new(100, 2, 60, vec![Regex::new("^@admin:x$").expect("re")]);
        let user = user_id!("@a:x");
        assert_eq!(l.admit(room_id!("!1:x"), user, 0), Admit::Go);
        assert_eq!(l.admit(room_id!("!2:x"), user, 0), Admit::Go);
        assert_eq!(l.admit(room_id!("!3:x"), user, 0), Admit::Tripped { who: Who::Asker, until: 60_000 });
        assert_eq!(l.admit(room_id!("!4:x"), user, 1), Admit::Cooling);
        for i in 0..50 {
            assert_eq!(l.admit(room_id!("!1:x"), user_id!("@admin:x"), i), Admit::Go, "exempt from the asker bucket");
        }
    }
}
