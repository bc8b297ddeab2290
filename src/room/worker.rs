//! A room worker: handles one room's pending events in order, one turn at a time.
//!
//! Each call of [`Worker::step`] does at most one turn's worth of work and returns, so
//! the scheduler can serve other rooms between two turns of a busy one:
//! 1. A turn left `running` by a crash is resumed (same id and events, so its writes
//!    reuse their transaction ids and nothing is posted twice), and the step ends.
//! 2. Otherwise the room's pending events are read in arrival order. Member events are
//!    applied (`membership`); messages and reactions are triaged (`facts`, `triggers`);
//!    a vote on a poll is kept; what starts nothing is marked processed.
//! 3. Questions that arrived too late (an outage) are not answered; the room is told once
//!    per outage to ask again.
//! 4. The first batch (one persona, one asker: a turn always answers one person) that
//!    does not wait passes the rate limits (`limiter`): a cooling room or asker gets
//!    nothing, a bucket that runs dry gets one notice. Then it is claimed by a turn (or a
//!    `!usage` notice) and run. Batches of pictures that wait for their words
//!    (`coalesce`) are passed over, each picture counted against its asker's bucket when
//!    it first waits; other batches stay pending for the next step.
//! 5. A room whose steps keep failing (not an outage) goes one event at a time, and the
//!    event that keeps failing is given up (`strikes`): no broken event silences a room.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use ruma::{OwnedRoomId, RoomId};

use super::Error;
use super::commands::Commands;
use super::facts::Triage;
use super::limiter::{Admit, Kind, Limiter, Who};
use super::membership::Membership;
use super::strikes::Strikes;
use super::triggers::Trigger;
use crate::clock::now_ms;
use crate::matrix;
use crate::metrics::Metrics;
use crate::personas::{self, Persona};
use crate::store::{Store, StoredEvent};
use crate::strings;
use crate::turn::{Outcome, Parties, Press, Turns};

/// Everything a room worker needs.
#[derive(Debug)]
pub struct Worker {
    store: Store,
    pub(super) triage: Triage,
    pub(super) membership: Membership,
    commands: Commands,
    turns: Turns,
    limiter: Limiter,
    metrics: Arc<Metrics>,
    /// Rooms told "I was away" since their last answered question.
    told_away: Mutex<HashSet<OwnedRoomId>>,
    /// Rooms that may hold a turn cut short (those of `running` turns at start, and rooms
    /// whose step failed): only these are asked for one, not every room on every step.
    unsettled: Mutex<HashSet<OwnedRoomId>>,
    /// Other instances share the database: any room may hold a turn one of them left
    /// running, so every step looks.
    shared: bool,
    /// Encrypted events made clear (when encryption is on).
    pub(super) decrypter: Option<super::decrypt::Decrypter>,
    strikes: Strikes,
    /// Pictures wait a moment for their words (`coalesce`).
    pub(super) coalesce: super::coalesce::Coalesce,
}

/// An event that starts a turn, with its persona and reason.
type Started<'a> = (&'a StoredEvent, &'a Persona, Trigger);

/// A step's events that need a persona: those that waited past their time, and those that
/// start a turn (or a command).
struct Sorted<'a> {
    stale: Vec<(&'a StoredEvent, &'a Persona)>,
    started: Vec<Started<'a>>,
}

impl Worker {
    pub fn new(
        store: Store,
        triage: Triage,
        membership: Membership,
        commands: Commands,
        turns: Turns,
        limiter: Limiter,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (told_away, unsettled) = (Mutex::default(), Mutex::default());
        Self {
            store,
            triage,
            membership,
            commands,
            turns,
            limiter,
            metrics,
            told_away,
            unsettled,
            shared: false,
            decrypter: None,
            strikes: Strikes::default(),
            coalesce: Default::default(),
        }
    }

    pub(super) fn store(&self) -> &Store {
        &self.store
    }

    /// Whether encrypted rooms are read (encryption on, and the homeserver supports it).
    fn decrypting(&self) -> Option<&super::decrypt::Decrypter> {
        self.decrypter.as_ref().filter(|d| d.crypto.active())
    }

    /// A worker among other instances' (see the `shared` field).
    pub fn shared(self) -> Self {
        Self { shared: true, ..self }
    }

    /// Reads which rooms hold turns a stop cut short (once, before the first step).
    pub async fn load_unsettled(&self) -> Result<(), Error> {
        let rooms = self.store.rooms_with_running_turns().await?;
        lock(&self.unsettled).extend(rooms);
        Ok(())
    }

    /// A step in `room` failed: it may have left a turn running.
    pub fn unsettle(&self, room: &RoomId) {
        lock(&self.unsettled).insert(room.to_owned());
    }

    /// Does the next turn's worth of work in `room` (see the module docs). Returns whether
    /// events were left for a later step.
    pub async fn step(&self, room: &RoomId) -> Result<bool, Error> {
        let careful = self.strikes.careful(room);
        let mut head = None;
        let done = self.step_events(room, careful.then_some(&mut head)).await;
        match &done {
            // One at a time until the room is clear: the broken one may be further on.
            Ok(_) if careful && head.is_some() => {
                self.strikes.handled_one(room);
                return Ok(true);
            }
            Ok(_) => self.strikes.clear(room),
            Err(e) if !e.is_outage() => {
                if let Some(seq) = self.strikes.strike(room, head) {
                    tracing::warn!(%room, seq, error = %e, "an event failed every step; given up");
                    self.store.end_key_wait(seq).await?;
                    self.store.mark_processed(&[seq]).await?;
                    Metrics::inc(&self.metrics.events_given_up);
                    return Ok(true);
                }
            }
            Err(_) => {}
        }
        done
    }

    /// The step itself; `one` (stepping carefully): only the first pending event, whose
    /// seq it is set to.
    async fn step_events(&self, room: &RoomId, one: Option<&mut Option<i64>>) -> Result<bool, Error> {
        if self.resume(room).await? {
            return Ok(true);
        }
        let events = self.pending(room, one).await?;
        let Sorted { stale, started } = self.sort(room, &events).await?;
        if !stale.is_empty() {
            self.tell_away(room, &stale).await?;
            return Ok(!started.is_empty());
        }
        self.start(room, &started).await
    }

    /// Resumes the room's turn that a crash or a stop cut short, if there is one (looked
    /// for among several instances, or after this one's own restart).
    async fn resume(&self, room: &RoomId) -> Result<bool, Error> {
        if !(self.shared || lock(&self.unsettled).contains(room)) {
            return Ok(false);
        }
        let Some((turn, events)) = self.store.unfinished_turn(room).await? else {
            lock(&self.unsettled).remove(room);
            return Ok(false);
        };
        tracing::info!(turn = turn.id, %room, "resuming a turn cut short");
        let presses = self.triage.presses_of(&turn, &events).await?;
        self.turns.run(&turn, &events, &presses).await?;
        Ok(true)
    }

    /// The room's pending events (only the first, when `one` asks for it and is told its
    /// `seq`), encrypted ones decrypted.
    async fn pending(&self, room: &RoomId, one: Option<&mut Option<i64>>) -> Result<Vec<StoredEvent>, Error> {
        let mut events = self.store.pending_events(room).await?;
        if let Some(head) = one {
            events.truncate(1);
            *head = events.first().map(|e| e.seq);
        }
        if let Some(decrypter) = self.decrypting() {
            events = decrypter.clear(room, events, &self.turns).await?;
        }
        Ok(events)
    }

    /// Handles what needs no turn (memberships, redactions, votes, verification requests,
    /// what is not for a persona) and marks it processed; sorts the rest into stale
    /// triggers and triggers that start a turn.
    async fn sort<'a>(&'a self, room: &RoomId, events: &'a [StoredEvent]) -> Result<Sorted<'a>, Error> {
        let mut quiet = Vec::new();
        let mut sorted = Sorted { stale: Vec::new(), started: Vec::new() };
        for event in events {
            match event.event_type.as_str() {
                // Applied and done at once: a later event that fails the step must not
                // make this one (a join and its greeting) happen again.
                "m.room.member" => {
                    self.apply_membership(event).await?;
                    self.store.mark_processed(&[event.seq]).await?;
                }
                "m.room.redaction" => {
                    self.commands.redaction(room, event).await?;
                    quiet.push(event.seq);
                }
                // Read and answered (the state is recorded at the door), or said once that
                // it cannot be.
                "m.room.encryption" | "m.room.encrypted" if self.decrypting().is_some() => quiet.push(event.seq),
                "m.room.encryption" | "m.room.encrypted" => {
                    self.membership.encrypted(event, &self.turns).await?;
                    quiet.push(event.seq);
                }
                "m.room.message" if super::verification::is_request(event) => {
                    if !self.membership.refuse_verification(event, &self.turns).await? {
                        quiet.push(event.seq);
                    }
                }
                crate::schedules::EVENT_TYPE => match self.triage.scheduled(event, &self.metrics).await? {
                    Some(persona) => sorted.started.push((event, persona, Trigger::Scheduled)),
                    None => quiet.push(event.seq),
                },
                "m.room.message" | "m.sticker" | "m.reaction" => match self.triage.trigger_of(event).await? {
                    Some((_, Trigger::Vote { poll, answer })) => {
                        quiet.push(self.commands.vote(event, poll, &answer).await?)
                    }
                    Some((persona, _)) if self.triage.stale(event) => sorted.stale.push((event, persona)),
                    Some((persona, trigger)) => sorted.started.push((event, persona, trigger)),
                    None => quiet.push(event.seq),
                },
                _ => quiet.push(event.seq),
            }
        }
        self.store.mark_processed(&quiet).await?;
        Ok(sorted)
    }

    /// Triggers that waited past their time (richbot was away): told once, as a notice,
    /// until the room is answered again; after that, only marked processed.
    async fn tell_away(&self, room: &RoomId, stale: &[(&StoredEvent, &Persona)]) -> Result<(), Error> {
        let Some(&(last, persona)) = stale.last() else { return Ok(()) };
        Metrics::add(&self.metrics.events_stale, stale.len() as u64);
        let stale_events: Vec<StoredEvent> = stale.iter().map(|(e, _)| (*e).clone()).collect();
        if lock(&self.told_away).insert(room.to_owned()) {
            let who = Parties { room, persona: &persona.user_id, asker: &last.sender };
            self.turns.notice(who, &stale_events, strings::AWAY.to_owned(), Outcome::Away).await?;
        } else {
            self.store.mark_processed(&stale_events.iter().map(|e| e.seq).collect::<Vec<_>>()).await?;
        }
        Ok(())
    }

    /// Starts the first batch of `started` that goes now, within the limits: a command, a
    /// turn, or a refusal. Whether more triggers wait.
    async fn start(&self, room: &RoomId, started: &[Started<'_>]) -> Result<bool, Error> {
        let is_dm = self.store.joined_members(room).await?.len() == 2;
        let Some(batch) = self.ready_batch(room, started, is_dm).await? else { return Ok(false) };
        let more = started.len() > batch.len();
        lock(&self.told_away).remove(room);
        let (first, persona, trigger) = batch[0];
        let asker = &*first.sender;
        let events: Vec<StoredEvent> = batch.iter().map(|(e, _, _)| (*e).clone()).collect();
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        let who = Parties { room, persona: &persona.user_id, asker };
        let kind = if matches!(trigger, Trigger::Command(_)) { Kind::Command } else { Kind::Turn { group: !is_dm } };
        // A schedule's occurrence is bounded by `[schedules]`, not the turn buckets; pictures
        // counted while they waited are not counted again.
        let admit = if matches!(trigger, Trigger::Scheduled) || self.coalesce.settle(&seqs) {
            Admit::Go
        } else {
            self.limiter.admit(room, asker, kind, now_ms())
        };
        match admit {
            Admit::Go if let Trigger::Command(command) = trigger => {
                self.commands.run(command, who, &events, is_dm, &self.turns).await?;
            }
            Admit::Go => {
                let turn = self.store.start_turn(room, &persona.user_id, asker, &seqs, None, now_ms()).await?;
                let presses: Vec<Press> = batch.iter().filter_map(|(_, _, t)| t.press()).collect();
                self.turns.run(&turn, &events, &presses).await?;
            }
            refused => self.refuse(who, &events, refused).await?,
        }
        Ok(more)
    }

    /// The first batch that goes now (see `batches`). Batches of pictures that wait for
    /// their words are passed over (their asker waits, no one else does), each picture
    /// counted against its asker's turn bucket when it first waits.
    async fn ready_batch<'b, 'a>(
        &self,
        room: &RoomId,
        started: &'b [Started<'a>],
        is_dm: bool,
    ) -> Result<Option<Vec<&'b Started<'a>>>, Error> {
        for batch in batches(started) {
            if !self.coalesce.waits(room, batch.iter().map(|(e, _, _)| *e), now_ms()) {
                return Ok(Some(batch));
            }
            for &&(picture, persona, _) in &batch {
                if self.coalesce.paid(picture.seq) {
                    continue;
                }
                let admit = self.limiter.admit(room, &picture.sender, Kind::Turn { group: !is_dm }, now_ms());
                if admit != Admit::Go {
                    self.coalesce.settle(&[picture.seq]);
                    let who = Parties { room, persona: &persona.user_id, asker: &picture.sender };
                    self.refuse(who, std::slice::from_ref(picture), admit).await?;
                }
            }
        }
        Ok(None)
    }

    /// `events` refused by the limiter: dropped while cooling, told once when it trips.
    async fn refuse(&self, who: Parties<'_>, events: &[StoredEvent], admit: Admit) -> Result<(), Error> {
        let Parties { room, asker, .. } = who;
        match admit {
            Admit::Tripped { who: whose, until } => {
                let minutes = u64::try_from((until - now_ms() + 59_999) / 60_000).unwrap_or(1).max(1);
                let text = match whose {
                    Who::Room => strings::room_cooling(minutes),
                    Who::Asker => strings::asker_cooling(asker.as_str(), minutes),
                };
                tracing::warn!(%room, %asker, ?whose, "turn rate limit tripped; cooling down");
                self.turns.notice(who, events, text, Outcome::RateLimited).await?;
            }
            _ => {
                tracing::info!(%room, %asker, "cooling down: not answered");
                self.store.mark_processed(&events.iter().map(|e| e.seq).collect::<Vec<_>>()).await?;
            }
        }
        Ok(())
    }

    /// A member event, applied. One the homeserver refuses for good is logged and done,
    /// not retried forever.
    async fn apply_membership(&self, event: &StoredEvent) -> Result<(), Error> {
        match self.membership.apply(event, &self.turns).await {
            Err(Error::Matrix(e @ matrix::Error::Refused { .. }))
            | Err(Error::Persona(personas::Error::Matrix(e @ matrix::Error::Refused { .. }))) => {
                tracing::warn!(event_id = %event.event_id, error = %e, "member event could not be applied");
                Ok(())
            }
            other => other,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The started events in batches, in the order of their first event: each persona and
/// asker's events together (a turn always answers one person), and each command or
/// schedule's occurrence a batch of its own.
fn batches<'a, 'b>(started: &'b [Started<'a>]) -> Vec<Vec<&'b Started<'a>>> {
    let alone = |t: &Trigger| matches!(t, Trigger::Command(_) | Trigger::Scheduled);
    let mut out: Vec<Vec<&'b Started<'a>>> = Vec::new();
    for s in started {
        let (e, p, t) = s;
        let joins = |b: &&mut Vec<&'b Started<'a>>| {
            let (head, head_persona, head_trigger) = b[0];
            !alone(t) && !alone(head_trigger) && head_persona.user_id == p.user_id && head.sender == e.sender
        };
        match out.iter_mut().find(joins) {
            Some(batch) => batch.push(s),
            None => out.push(vec![s]),
        }
    }
    out
}
