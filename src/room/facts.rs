//! Triage: which persona (if any) an event addresses, and why. This file gathers the facts
//! about the event's room and relations from the store; the decision itself is the pure
//! `triggers::trigger`. Every lookup is scoped to the event's room: a reply, thread or
//! reaction in room B to a persona message of room A is nothing to the persona in B, and a
//! `.used` button press counts only for a button the persona posted in that room.

use regex::Regex;
use ruma::UserId;

use super::triggers::{self, Facts, Trigger};
use crate::blocks::{Rich, read_payload, read_used_id};
use crate::personas::{Persona, Personas};
use crate::store::{self, Store, StoredEvent};

/// The deployment's rules for when the personas answer.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Events delivered later than this after they were sent (an outage) get no answer.
    pub staleness_ms: i64,
    /// In group rooms, answer only when addressed.
    pub group_requires_mention: bool,
    /// Who may invite and talk to the personas (`[access]`).
    pub access: super::Admission,
    /// Turn rate limits.
    pub rates: Rates,
    /// Leave encrypted rooms (after saying why), or stay silent in them.
    pub leave_encrypted: bool,
    /// Rooms joined on one member's invites, and in all, at most.
    pub rooms_per_inviter: u64,
    pub rooms_total: u64,
    /// How long a picture or file waits for its sender's words (`bot.coalesce_ms`).
    pub coalesce_ms: u64,
}

/// Turn rate limits (`limits.turns_per_*`, `loop_cooldown_secs`, `exempt`).
#[derive(Debug, Clone)]
pub struct Rates {
    pub per_room_per_minute: u32,
    pub per_asker_per_minute: u32,
    pub cooldown_secs: u64,
    /// Askers without a bucket of their own.
    pub exempt: Vec<Regex>,
}

impl Policy {
    pub fn allowed(&self, user: &UserId) -> bool {
        self.access.admits(user.as_str())
    }
}

/// Decides what an event starts.
#[derive(Debug, Clone)]
pub struct Triage {
    pub(super) store: Store,
    pub(super) personas: Personas,
    pub(super) policy: Policy,
    /// Who answers for the agents' clients, when their schedules come due (none: no
    /// client is configured).
    pub(super) clients: Option<std::sync::Arc<dyn crate::schedules::ClientRooms>>,
}

impl Triage {
    pub fn new(store: Store, personas: Personas, policy: Policy) -> Self {
        Self { store, personas, policy, clients: None }
    }

    /// Whether `event` came too late to answer (see `triggers::is_stale`).
    pub fn stale(&self, event: &StoredEvent) -> bool {
        triggers::is_stale(event.origin_ts, event.received_at, self.policy.staleness_ms)
    }

    /// Which persona the event addresses, and why.
    pub async fn trigger_of(&self, event: &StoredEvent) -> Result<Option<(&Persona, Trigger)>, store::Error> {
        let joined = self.store.joined_members(&event.room_id).await?;
        let here: Vec<&Persona> = self.personas.all().iter().filter(|p| joined.contains(&p.user_id)).collect();
        if here.is_empty() {
            return Ok(None);
        }
        let relation = event.relation();
        // Our messages the event points at, in this room only.
        let ours_here = |id| async move {
            let sent = self.store.sent_message(id).await?;
            Ok::<_, store::Error>(sent.filter(|m| m.room_id == event.room_id))
        };
        let replied = match relation.as_ref().and_then(|r| r.reply_to()) {
            Some(id) => ours_here(id).await?,
            None => None,
        };
        let target = match relation.as_ref().and_then(|r| r.target()) {
            Some(id) => ours_here(id).await?,
            None => None,
        };
        let used = read_used_id(event.content());
        // A reaction to an approval notice is the approval's (decided at the door), never
        // a button press.
        let approval_notice = match (&target, event.event_type.as_str()) {
            (Some(m), "m.reaction") => !self.store.approvals_by_notice(&[m.event_id.as_str()]).await?.is_empty(),
            _ => false,
        };
        let buttons = if event.event_type == "m.reaction" && !approval_notice {
            target.as_ref().and_then(buttons_of)
        } else {
            None
        };
        // The buttons a typed answer may press: of the message it replies to, or in a DM
        // of the persona's latest with buttons among its last few (a final "Done." may
        // follow them). A text only; an approval's notice is decided by reaction alone.
        let is_text = event.event_type == "m.room.message";
        let dm = joined.len() == 2;
        let thread_root = relation.as_ref().and_then(|r| r.thread_root());
        // The reply's, reaction's or thread's message, if an agent client had it sent.
        let answers_agent = [&replied, &target].iter().any(|m| m.as_ref().is_some_and(|m| m.client.is_some()));
        for persona in here {
            let pid = &persona.user_id;
            let in_thread = match thread_root {
                Some(root) => self.store.posted_in_thread(&event.room_id, root, pid).await?,
                None => false,
            };
            let used_button_posted = match used {
                Some(id) => self.store.button_posted(&event.room_id, pid, id).await?,
                None => false,
            };
            let recent = match (&replied, is_text) {
                (None, true) if dm => self.store.recent_sent(&event.room_id, pid, TYPED_PRESS_RECENT).await?,
                _ => Vec::new(),
            };
            let typed_on = match (&replied, is_text) {
                (Some(m), true) if m.sender == *pid => Some(m.clone()),
                _ => recent.iter().find(|m| buttons_of(m).is_some_and(|b| !b.is_empty())).cloned(),
            };
            let poll =
                self.poll_answered(event, replied.as_ref().filter(|m| m.sender == *pid && is_text), &recent).await?;
            let typed_on = match typed_on {
                Some(m) if self.store.approvals_by_notice(&[m.event_id.as_str()]).await?.is_empty() => Some(m),
                _ => None,
            };
            let typed_buttons = typed_on.as_ref().and_then(|m| Some((buttons_of(m)?, m)));
            let facts = Facts {
                persona_id: pid,
                display_name: &persona.display_name,
                is_dm: dm,
                sender_is_ours: self.personas.get(&event.sender).is_some(),
                sender_allowed: self.policy.allowed(&event.sender),
                group_requires_mention: self.policy.group_requires_mention,
                used_button_posted,
                replies_to_persona: replied.as_ref().is_some_and(|m| m.sender == *pid),
                in_persona_thread: in_thread,
                reacted_buttons: target.as_ref().filter(|m| m.sender == *pid).and(buttons.as_deref()),
                typed_buttons: typed_buttons.as_ref().map(|(b, m)| (b.as_slice(), m.event_id.as_ref())),
                answers_agent,
                poll: poll.as_ref().map(|(p, by_name)| (p.answers.as_slice(), p.id, *by_name)),
            };
            if let Some(t) = triggers::trigger(&event.event, &facts) {
                return Ok(Some((persona, t)));
            }
        }
        Ok(None)
    }
}

impl Triage {
    /// The button presses among a resumed turn's events, triaged again.
    pub async fn presses_of(
        &self,
        turn: &store::TurnRow,
        events: &[StoredEvent],
    ) -> Result<Vec<crate::turn::Press>, store::Error> {
        let mut out = Vec::new();
        for e in events {
            if let Some((p, t)) = self.trigger_of(e).await?
                && p.user_id == turn.persona
                && let Some(press) = t.press()
            {
                out.push(press);
            }
        }
        Ok(out)
    }

    /// The open poll a text may vote on, and whether by an answer's words: the one the
    /// text replies to (the poll or its message); in a DM, for a bare number, the newest
    /// among the persona's `recent` messages.
    async fn poll_answered(
        &self,
        event: &StoredEvent,
        replied: Option<&store::SentMessage>,
        recent: &[store::SentMessage],
    ) -> Result<Option<(store::PollRow, bool)>, store::Error> {
        if let Some(m) = replied {
            return Ok(self.store.open_poll_of(&event.room_id, &m.event_id).await?.map(|p| (p, true)));
        }
        let body = event.content().get("body").and_then(serde_json::Value::as_str).unwrap_or_default();
        if recent.is_empty() || crate::polls::number(body).is_none() {
            return Ok(None);
        }
        for m in recent {
            if let Some(p) = self.store.open_poll_of(&event.room_id, &m.event_id).await? {
                return Ok(Some((p, false)));
            }
        }
        Ok(None)
    }
}

/// How many of the persona's latest messages in a DM a typed answer may press a button of.
const TYPED_PRESS_RECENT: i64 = 3;

/// The buttons of a message of ours.
fn buttons_of(m: &store::SentMessage) -> Option<Vec<crate::blocks::Button>> {
    Some(Rich::from_value(read_payload(&m.content)?).ok()?.buttons())
}
