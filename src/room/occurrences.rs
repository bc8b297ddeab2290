//! A schedule's occurrence, reached the room stage (`crate::schedules`): it starts a turn
//! of its own for the schedule's asker, as the schedule's persona, if the schedule still
//! holds. A schedule cancelled since the occurrence fired does nothing. One whose asker
//! left the room, was banned, or lost access (`access.allow`), whose persona is gone
//! from the room or the configuration, or whose agents' client is gone from the config or
//! may no longer post in the room (`ClientRooms`), stops: nothing is posted, and the stop
//! is logged.

use super::Error;
use super::facts::Triage;
use crate::clock::now_ms;
use crate::metrics::Metrics;
use crate::personas::Persona;
use crate::schedules::Occurrence;
use crate::store::StoredEvent;

impl Triage {
    /// The persona that carries out `event`, a schedule's occurrence, if it still may.
    pub(super) async fn scheduled(&self, event: &StoredEvent, metrics: &Metrics) -> Result<Option<&Persona>, Error> {
        let Some(o) = Occurrence::read(event.content()) else {
            tracing::warn!(event_id = %event.event_id, "an unreadable schedule occurrence; skipped");
            return Ok(None);
        };
        let Some(row) = self.store.schedule(o.schedule).await? else { return Ok(None) };
        if row.room_id != event.room_id || row.asker != event.sender {
            tracing::warn!(schedule = row.id, event_id = %event.event_id, "an occurrence that is not its schedule's; skipped");
            return Ok(None);
        }
        if row.state == "cancelled" || row.state == "stopped" {
            tracing::info!(schedule = row.id, state = row.state, "an occurrence of an ended schedule; not carried out");
            return Ok(None);
        }
        let members = self.store.joined_members(&row.room_id).await?;
        let persona = self.personas.get(&row.persona);
        // An agent client's schedule is the persona's own: `[access]` is for members.
        let member = row.asker != row.persona;
        let why = if member && !self.policy.allowed(&row.asker) {
            Some("its asker lost access (access.allow or access.deny)".to_owned())
        } else if !members.contains(&row.asker) {
            Some("its asker is no longer in the room (left or banned)".to_owned())
        } else if persona.is_none() {
            Some("its persona is no longer configured".to_owned())
        } else if !members.contains(&row.persona) {
            Some("its persona is no longer in the room".to_owned())
        } else if let Some(client) = &row.client {
            match &self.clients {
                None => Some(format!("its agent client {client} is no longer configured")),
                Some(clients) => clients
                    .may_still_post(client, &row.room_id)
                    .await
                    .map_err(|e| Error::Matrix(crate::matrix::Error::Unavailable(e)))?,
            }
        } else {
            None
        };
        if let Some(why) = why {
            let why = why.as_str();
            if self.store.end_schedule(row.id, "stopped", why, now_ms()).await? {
                Metrics::inc(&metrics.schedules_stopped);
                tracing::warn!(schedule = row.id, room = %row.room_id, asker = %row.asker, why, "schedule stopped");
            }
            return Ok(None);
        }
        Ok(persona)
    }
}
