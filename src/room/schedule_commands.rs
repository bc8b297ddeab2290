//! The schedule commands, answered without the model:
//! - `!schedules`: the asker's schedules in this room, with ids and next times; everyone's
//!   for those who may change the room's mode (power level 50), who look after the room.
//! - `!unschedule <id>`: cancels one of the asker's (or, for those, anyone's in the room).
//! - `!timezone [zone]`: shows or sets the asker's IANA zone, told to the model and used
//!   for the times richbot writes them.

use super::Error;
use super::command_syntax::Command;
use super::commands::Commands;
use crate::clock::now_ms;
use crate::schedules::{self, when};
use crate::turn::Parties;

/// Schedules listed at most in one answer.
const LISTED: usize = 30;

impl Commands {
    /// The answer to a schedule command.
    pub(super) async fn schedule_command(
        &self,
        command: &Command,
        who: Parties<'_>,
        is_dm: bool,
    ) -> Result<String, Error> {
        let Parties { room, persona, asker } = who;
        let now = now_ms();
        let steward = !is_dm && self.may_set_mode(room, persona, asker).await?;
        Ok(match command {
            Command::Schedules => {
                let rows = self.store.active_schedules((!steward).then_some(asker), Some(room)).await?;
                if rows.is_empty() {
                    let whose = if steward { "There are no schedules" } else { "You have no schedules" };
                    return Ok(format!("{whose} in this room. Ask me in words: \"remind me tomorrow at 9\"."));
                }
                let whose = if steward { "Schedules in this room" } else { "Your schedules in this room" };
                let mut text = format!("{whose} ({}):", rows.len());
                let more = rows.len().saturating_sub(LISTED);
                let lines = schedules::off_workers(move || {
                    rows.iter().take(LISTED).map(|row| schedules::line(row, now)).collect::<Vec<_>>()
                })
                .await;
                for line in lines {
                    text.push_str(&format!("\n- {line}"));
                }
                if more > 0 {
                    text.push_str(&format!("\n… and {more} more."));
                }
                text.push_str("\nCancel one with `!unschedule <id>`.");
                text
            }
            Command::Unschedule(id) => {
                let Ok(id) = id.parse::<i64>() else {
                    return Ok(format!(
                        "`{}` is not a schedule id; `!schedules` lists them.",
                        crate::blocks::cut(id, 20)
                    ));
                };
                let row = self.store.schedule(id).await?;
                let may = row
                    .as_ref()
                    .is_some_and(|r| r.state == "active" && r.room_id == room && (r.asker == asker || steward));
                if !may || !self.store.end_schedule(id, "cancelled", &format!("cancelled by {asker}"), now).await? {
                    return Ok(format!(
                        "#{id} is not an active schedule of yours in this room; `!schedules` lists them."
                    ));
                }
                tracing::info!(schedule = id, %asker, %room, "schedule cancelled by command");
                format!("Cancelled schedule #{id}.")
            }
            Command::Timezone(None) => match self.store.user_timezone(asker).await? {
                Some(zone) => format!("Your time zone is {zone}. Change it with `!timezone Europe/Lisbon`."),
                None => {
                    "You have not set a time zone. Set one with `!timezone Europe/Lisbon` (an IANA name).".to_owned()
                }
            },
            Command::Timezone(Some(zone)) => match when::zone(zone) {
                Ok(tz) => {
                    self.store.set_user_timezone(asker, tz.name()).await?;
                    let local = when::spoken(now, tz);
                    format!("From now on I write your times in {} (it is {local} there now).", tz.name())
                }
                Err(e) => format!("I don't know that zone: {e}."),
            },
            _ => String::new(),
        })
    }
}
