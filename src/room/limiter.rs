//! Turn rate limits, so that no bot (another richbot, an echo bot) can keep a persona in a
//! loop and no member can flood it: a token bucket per room and one per asker, each
//! holding `n` turns and refilled at `n` per minute. When a bucket runs dry, its room (or
//! asker) cools down for `cooldown`: the worker posts one notice saying so, and nothing
//! that arrives meanwhile is answered, then or later.
//!
//! One member cannot silence a group room: an asker may take at most half of its bucket
//! (their share, refilled at half the rate), so one asker running dry cools only that
//! asker, and the room cools down only when several askers (or bots in a loop) together
//! drain it. Commands (`!help`, `!usage`, ...) call no model: they have a bucket of their
//! own per asker, twice the turns', and take nothing from the room's.
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
    fn full(per_minute: u32, now: i64) -> Self {
        Self { tokens: f64::from(per_minute), at: now }
    }

    /// Refills, then takes one token if there is one.
    fn take(&mut self, per_minute: u32, now: i64) -> bool {
        self.refill(per_minute, now);
        let ok = self.tokens >= 1.0;
        if ok {
            self.tokens -= 1.0;
        }
        ok
    }

    /// Refills at `per_minute` tokens a minute, up to `per_minute`.
    fn refill(&mut self, per_minute: u32, now: i64) {
        let cap = f64::from(per_minute);
        let elapsed = (now - self.at).max(0) as f64;
        self.tokens = (self.tokens + elapsed * cap / 60_000.0).min(cap);
        self.at = now;
    }
}

/// What is asked for: a turn of the model (in a group room, where one asker may take
/// only their share of the room's bucket, or in a DM), or a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Turn { group: bool },
    Command,
}

#[derive(Debug, Default)]
struct State {
    rooms: HashMap<OwnedRoomId, Bucket>,
    askers: HashMap<OwnedUserId, Bucket>,
    /// Each asker's share of each room's bucket.
    shares: HashMap<(OwnedRoomId, OwnedUserId), Bucket>,
    commands: HashMap<OwnedUserId, Bucket>,
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

    /// Takes one turn (or command) at `now` from the buckets it draws on, if they all
    /// have one.
    pub fn admit(&self, room: &RoomId, asker: &UserId, kind: Kind, now: i64) -> Admit {
        let mut guard = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = &mut *guard;
        let exempt = self.exempt(asker);
        let cooling = |until: Option<&i64>| until.is_some_and(|u| *u > now);
        if cooling(s.cooling_rooms.get(room)) || (!exempt && cooling(s.cooling_askers.get(asker))) {
            return Admit::Cooling;
        }
        if s.rooms.len() + s.askers.len() + s.shares.len() + s.commands.len() > PRUNE_AT {
            self.prune(s, now);
        }
        let until = now.saturating_add(self.cooldown_ms);
        let share = self.share();
        if kind == Kind::Command {
            if exempt {
                return Admit::Go;
            }
            let commands = self.commands();
            let bucket = s.commands.entry(asker.to_owned()).or_insert_with(|| Bucket::full(commands, now));
            return match bucket.take(commands, now) {
                true => Admit::Go,
                false => {
                    s.cooling_askers.insert(asker.to_owned(), until);
                    Admit::Tripped { who: Who::Asker, until }
                }
            };
        }
        let group = kind == Kind::Turn { group: true };
        if !exempt {
            let key = (room.to_owned(), asker.to_owned());
            let own = s.askers.entry(asker.to_owned()).or_insert_with(|| Bucket::full(self.per_asker, now));
            own.refill(self.per_asker, now);
            let part = s.shares.entry(key).or_insert_with(|| Bucket::full(share, now));
            part.refill(share, now);
            if own.tokens < 1.0 || (group && part.tokens < 1.0) {
                s.cooling_askers.insert(asker.to_owned(), until);
                return Admit::Tripped { who: Who::Asker, until };
            }
        }
        let room_bucket = s.rooms.entry(room.to_owned()).or_insert_with(|| Bucket::full(self.per_room, now));
        if !room_bucket.take(self.per_room, now) {
            s.cooling_rooms.insert(room.to_owned(), until);
            return Admit::Tripped { who: Who::Room, until };
        }
        if !exempt {
            for b in
                [s.askers.get_mut(asker), s.shares.get_mut(&(room.to_owned(), asker.to_owned()))].into_iter().flatten()
            {
                b.tokens -= 1.0;
            }
        }
        Admit::Go
    }

    /// An asker's share of a room's bucket: half of it (at least one).
    fn share(&self) -> u32 {
        (self.per_room / 2).max(1)
    }

    /// Commands per asker: twice their turns.
    fn commands(&self) -> u32 {
        self.per_asker.saturating_mul(2)
    }

    /// Drops the entries that are idle (full, not cooling).
    fn prune(&self, s: &mut State, now: i64) {
        let keep = |b: &mut Bucket, cap: u32| {
            b.refill(cap, now);
            b.tokens < f64::from(cap)
        };
        s.rooms.retain(|_, b| keep(b, self.per_room));
        s.askers.retain(|_, b| keep(b, self.per_asker));
        let (share, commands) = (self.share(), self.commands());
        s.shares.retain(|_, b| keep(b, share));
        s.commands.retain(|_, b| keep(b, commands));
        s.cooling_rooms.retain(|_, until| *until > now);
        s.cooling_askers.retain(|_, until| *until > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruma::{room_id, user_id};

    const MIN: i64 = 60_000;
    const TURN: Kind = Kind::Turn { group: true };

    #[test]
    fn a_room_gets_its_bucket_then_one_trip_then_silence_until_the_cooldown_ends() {
        let l = Limiter::new(3, 100, 300, Vec::new());
        let room = room_id!("!r:x");
        let bots: Vec<ruma::OwnedUserId> =
            (0..6).map(|i| ruma::UserId::parse(format!("@echo{i}:x")).expect("id")).collect();
        let got: Vec<Admit> = (0..6).map(|i| l.admit(room, &bots[i], TURN, i as i64)).collect();
        let until = 3 + 300_000;
        assert_eq!(
            got,
            [Admit::Go, Admit::Go, Admit::Go, Admit::Tripped { who: Who::Room, until }, Admit::Cooling, Admit::Cooling]
        );
        assert_eq!(l.admit(room_id!("!other:x"), &bots[5], TURN, 10), Admit::Go, "other rooms are not affected");
        assert_eq!(l.admit(room, &bots[4], TURN, until - 1), Admit::Cooling);
        assert_eq!(l.admit(room, &bots[4], TURN, until), Admit::Go, "cooled down, and refilled meanwhile");
    }

    #[test]
    fn buckets_refill_at_their_rate_per_minute() {
        let l = Limiter::new(4, 100, 1, Vec::new());
        let (room, user) = (room_id!("!r:x"), user_id!("@a:x"));
        // One asker's share is half the room's: two of four.
        assert_eq!(l.admit(room, user, TURN, 0), Admit::Go);
        assert_eq!(l.admit(room, user, TURN, 0), Admit::Go);
        // Half a minute refills one of the share's two.
        assert_eq!(l.admit(room, user, TURN, MIN / 2), Admit::Go);
        assert!(matches!(l.admit(room, user, TURN, MIN / 2), Admit::Tripped { who: Who::Asker, .. }));
    }

    #[test]
    fn one_asker_draining_a_room_cools_only_that_asker() {
        let l = Limiter::new(8, 100, 300, Vec::new());
        let room = room_id!("!r:x");
        let (loud, quiet) = (user_id!("@loud:x"), user_id!("@quiet:x"));
        let loud_got: Vec<Admit> = (0..6).map(|i| l.admit(room, loud, TURN, i)).collect();
        assert_eq!(&loud_got[..4], [Admit::Go; 4], "half of the room's eight");
        assert_eq!(loud_got[4], Admit::Tripped { who: Who::Asker, until: 4 + 300_000 });
        assert_eq!(loud_got[5], Admit::Cooling);
        assert_eq!(l.admit(room, quiet, TURN, 10), Admit::Go, "the room still answers the others");
        // In a DM the one asker has the room's whole bucket.
        let dm = room_id!("!dm:x");
        let got: Vec<Admit> = (0..9).map(|i| l.admit(dm, quiet, Kind::Turn { group: false }, 20 + i)).collect();
        assert_eq!(&got[..8], [Admit::Go; 8]);
        assert_eq!(got[8], Admit::Tripped { who: Who::Room, until: 28 + 300_000 });
    }

    #[test]
    fn commands_have_a_bucket_of_their_own_and_take_nothing_from_the_room() {
        let l = Limiter::new(8, 12, 300, Vec::new());
        let (room, user, other) = (room_id!("!r:x"), user_id!("@a:x"), user_id!("@b:x"));
        for i in 0..24 {
            assert_eq!(l.admit(room, user, Kind::Command, i), Admit::Go, "command {i}");
        }
        assert!(matches!(l.admit(room, user, Kind::Command, 30), Admit::Tripped { who: Who::Asker, .. }));
        for i in 0..4 {
            assert_eq!(l.admit(room, other, TURN, 40 + i), Admit::Go, "the room's bucket is untouched");
        }
    }

    #[test]
    fn an_asker_has_a_bucket_across_rooms_unless_exempt() {
        let l = Limiter::new(100, 2, 60, vec![Regex::new("^@admin:x$").expect("re")]);
        let user = user_id!("@a:x");
        assert_eq!(l.admit(room_id!("!1:x"), user, TURN, 0), Admit::Go);
        assert_eq!(l.admit(room_id!("!2:x"), user, TURN, 0), Admit::Go);
        assert_eq!(l.admit(room_id!("!3:x"), user, TURN, 0), Admit::Tripped { who: Who::Asker, until: 60_000 });
        assert_eq!(l.admit(room_id!("!4:x"), user, TURN, 1), Admit::Cooling);
        for i in 0..50 {
            assert_eq!(
                l.admit(room_id!("!1:x"), user_id!("@admin:x"), TURN, i),
                Admit::Go,
                "exempt from the asker bucket"
            );
        }
    }
}
