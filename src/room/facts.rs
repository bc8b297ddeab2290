//! Triage: which persona (if any) an event addresses, and why. This file gathers the facts
//! about the event's room and relations from the store; the decision itself is the pure
//! `triggers::trigger`.

use regex::Regex;
use ruma::UserId;

use super::triggers::{self, Facts, Trigger};
use crate::blocks::{Rich, read_payload};
use crate::clock::now_ms;
use crate::personas::{Persona, Personas};
use crate::store::{self, Store, StoredEvent};

/// The deployment's rules for when the personas answer.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Events older than this (by their timestamp) start nothing.
    pub staleness_ms: i64,
    /// In group rooms, answer only when addressed.
    pub group_requires_mention: bool,
    /// Who may invite and talk to the personas (`access.allow`).
    pub allow: Vec<Regex>,
}

impl Policy {
    pub fn allowed(&self, user: &UserId) -> bool {
        self.allow.iter().any(|re| re.is_match(user.as_str()))
    }
}

/// Decides what an event starts.
#[derive(Debug, Clone)]
pub struct Triage {
    store: Store,
    personas: Personas,
    policy: Policy,
}

impl Triage {
    pub fn new(store: Store, personas: Personas, policy: Policy) -> Self {
        Self { store, personas, policy }
    }

    /// Which persona the event addresses, and why. With `live` false (a resumed turn) the
    /// staleness window is not applied: the event was fresh when the turn started.
    pub async fn trigger_of(
        &self,
        event: &StoredEvent,
        live: bool,
    ) -> Result<Option<(&Persona, Trigger)>, store::Error> {
        let joined = self.store.joined_members(&event.room_id).await?;
        let here: Vec<&Persona> = self.personas.all().iter().filter(|p| joined.contains(&p.user_id)).collect();
        if here.is_empty() {
            return Ok(None);
        }
        let relation = event.relation();
        let replied = match relation.as_ref().and_then(|r| r.reply_to()) {
            Some(id) => self.store.sent_message(id).await?,
            None => None,
        };
        let target = match relation.as_ref().and_then(|r| r.target()) {
            Some(id) => self.store.sent_message(id).await?,
            None => None,
        };
        let buttons = if event.event_type == "m.reaction" {
            target
                .as_ref()
                .and_then(|m| read_payload(&m.content).and_then(|p| Rich::from_value(p).ok()))
                .map(|r| r.buttons())
        } else {
            None
        };
        let thread_root = relation.as_ref().and_then(|r| r.thread_root());
        for persona in here {
            let pid = &persona.user_id;
            let in_thread = match thread_root {
                Some(root) => self.store.posted_in_thread(&event.room_id, root, pid).await?,
                None => false,
            };
            let facts = Facts {
                persona_id: pid,
                display_name: &persona.display_name,
                is_dm: joined.len() == 2,
                sender_is_ours: self.personas.get(&event.sender).is_some(),
                sender_allowed: self.policy.allowed(&event.sender),
                now_ms: if live { now_ms() } else { event.origin_ts },
                staleness_ms: self.policy.staleness_ms,
                group_requires_mention: self.policy.group_requires_mention,
                replies_to_persona: replied.as_ref().is_some_and(|m| m.sender == *pid),
                in_persona_thread: in_thread,
                reacted_buttons: target.as_ref().filter(|m| m.sender == *pid).and(buttons.as_deref()),
            };
            if let Some(t) = triggers::trigger(&event.event, &facts) {
                return Ok(Some((persona, t)));
            }
        }
        Ok(None)
    }
}
