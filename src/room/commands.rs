//! Conversation commands, handled by richbot and never sent to the model: in a DM as
//! plain messages, in a group room after the persona's mention (`Richbot: !reset`).
//!
//! - `!help`: what the persona does, and the commands.
//! - `!reset`: the conversation before it leaves the model's context (stored, not
//!   deleted); in a group room it is everyone's, so it takes what `!mode` takes.
//! - `!mode thread|reply|flat` (group rooms): how answers are placed; changing it takes
//!   power level 50, or being a creator where creators outrank every level (`power`).
//! - `!usage`: the asker's turns and tokens today, and their limit.
//! - `!schedules`, `!unschedule <id>`, `!timezone [zone]` (`schedule_commands`).
//!
//! Each is answered with one `m.notice`, through a notice turn that claims the command.

use ruma::{RoomId, UserId};

use super::Error;
use super::command_syntax::{Command, MODES};
use crate::matrix;
use crate::personas::Personas;
use crate::store::{Store, StoredEvent};
use crate::strings;
use crate::turn::{Outcome, Parties, Turns};

/// The power level that may change a room's mode.
const MODE_LEVEL: i64 = 50;

/// Handles commands.
#[derive(Debug)]
pub struct Commands {
    pub(super) store: Store,
    pub(super) matrix: matrix::Client,
    pub(super) personas: Personas,
}

impl Commands {
    pub fn new(store: Store, matrix: matrix::Client, personas: Personas) -> Self {
        Self { store, matrix, personas }
    }

    /// Answers `command` (claimed from `events`) in `room` for `asker`.
    pub async fn run(
        &self,
        command: &Command,
        who: Parties<'_>,
        events: &[StoredEvent],
        is_dm: bool,
        turns: &Turns,
    ) -> Result<(), Error> {
        let Parties { room, persona, asker } = who;
        let outcome = Outcome::Command(command.name().to_owned());
        let text = match command {
            Command::Usage => {
                turns.usage(who, events).await?;
                return Ok(());
            }
            Command::Help => strings::help(persona.as_str()),
            // In a group room, forgetting everyone's conversation takes the same power
            // as changing how the room is answered.
            Command::Reset if !is_dm && !self.may_set_mode(room, persona, asker).await? => {
                strings::reset_refused(MODE_LEVEL)
            }
            Command::Reset => {
                let upto = events.iter().map(|e| e.seq).max().unwrap_or(0);
                self.store.reset_room(room, upto).await?;
                strings::RESET.to_owned()
            }
            Command::Mode(_) if is_dm => strings::MODE_DM.to_owned(),
            Command::Mode(None) => {
                let mode = self.store.room_mode(room).await?.unwrap_or_else(|| "reply".to_owned());
                strings::mode_is(&mode)
            }
            Command::Mode(Some(mode)) if !MODES.contains(&mode.as_str()) => strings::mode_unknown(mode),
            Command::Mode(Some(mode)) => {
                if self.may_set_mode(room, persona, asker).await? {
                    self.store.set_room_mode(room, mode).await?;
                    strings::mode_set(mode)
                } else {
                    strings::mode_refused(MODE_LEVEL)
                }
            }
            Command::Schedules | Command::Unschedule(_) | Command::Timezone(_) => {
                self.schedule_command(command, who, is_dm).await?
            }
            Command::Unknown(word) => strings::unknown_command(word),
        };
        turns.notice(who, events, text, outcome).await?;
        Ok(())
    }

    /// Whether `user` may change the room's settings (`!mode`, `!reset` in a group
    /// room): by the room version's rules (`power`).
    pub(super) async fn may_set_mode(&self, room: &RoomId, persona: &UserId, user: &UserId) -> Result<bool, Error> {
        let state = self.matrix.room_state(room, persona).await?;
        Ok(super::power::power(&state, user).at_least(MODE_LEVEL))
    }
}
