//! Conversation commands, handled by richbot and never sent to the model: in a DM as
//! plain messages, in a group room after the persona's mention (`Richbot: !reset`).
//!
//! - `!help`: what the persona does, and the commands.
//! - `!reset`: the conversation before it leaves the model's context (stored, not deleted).
//! - `!mode thread|reply|flat` (group rooms): how answers are placed; changing it takes
//!   power level 50, or being a creator where creators outrank every level (room v12).
//! - `!usage`: the asker's turns and tokens today, and their limit.
//!
//! Each is answered with one `m.notice`, through a notice turn that claims the command.

use ruma::{RoomId, UserId};
use serde_json::Value;

use super::Error;
use super::triggers::Facts;
use crate::matrix;
use crate::store::{Store, StoredEvent};
use crate::strings;
use crate::turn::{Outcome, Turns};

/// The answer modes of a group room.
pub const MODES: &[&str] = &["thread", "reply", "flat"];
/// The power level that may change a room's mode.
const MODE_LEVEL: i64 = 50;

/// The conversation commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    /// Start the model's context afresh from here.
    Reset,
    /// The asker's turns and tokens today, and their limits.
    Usage,
    /// Show (`None`) or set how answers are placed in a group room.
    Mode(Option<String>),
    /// A `!word` that is none of these.
    Unknown(String),
}

impl Command {
    /// The command's name, as typed.
    pub fn name(&self) -> &str {
        match self {
            Command::Help => "help",
            Command::Reset => "reset",
            Command::Usage => "usage",
            Command::Mode(_) => "mode",
            Command::Unknown(w) => w,
        }
    }
}

/// The command of a message: after a leading mention of the persona (`Richbot: !usage`,
/// `@richbot:example.org !mode thread`), a `!word` alone, or `!mode` and its argument. A
/// longer message that starts with `!` is a question, not a command.
pub(super) fn command(body: &str, facts: &Facts<'_>) -> Option<Command> {
    let mut rest = body.trim_start();
    let names = [facts.persona_id.as_str(), facts.display_name, facts.persona_id.localpart()];
    for name in names.into_iter().filter(|n| !n.is_empty()) {
        if let Some(after) =
            rest.get(..name.len()).filter(|p| p.eq_ignore_ascii_case(name)).map(|_| &rest[name.len()..])
        {
            rest = after.trim_start_matches([':', ',']).trim_start();
            break;
        }
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    let name = words.first()?.strip_prefix('!').filter(|w| !w.is_empty())?.to_lowercase();
    match (name.as_str(), words.len()) {
        ("help", 1) => Some(Command::Help),
        ("reset", 1) => Some(Command::Reset),
        ("usage", 1) => Some(Command::Usage),
        ("mode", 1) => Some(Command::Mode(None)),
        ("mode", 2) => Some(Command::Mode(Some(words[1].to_lowercase()))),
        ("help" | "reset" | "usage" | "mode", _) => None,
        (_, 1) => Some(Command::Unknown(name)),
        _ => None,
    }
}

/// Handles commands.
#[derive(Debug)]
pub struct Commands {
    store: Store,
    matrix: matrix::Client,
}

impl Commands {
    pub fn new(store: Store, matrix: matrix::Client) -> Self {
        Self { store, matrix }
    }

    /// Answers `command` (claimed from `events`) in `room` for `asker`.
    pub async fn run(
        &self,
        command: &Command,
        (room, persona, asker): (&RoomId, &UserId, &UserId),
        events: &[StoredEvent],
        is_dm: bool,
        turns: &Turns,
    ) -> Result<(), Error> {
        let who = (room, persona, asker);
        let outcome = Outcome::Command(command.name().to_owned());
        let text = match command {
            Command::Usage => {
                turns.usage(who, events).await?;
                return Ok(());
            }
            Command::Help => strings::help(persona.as_str()),
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
            Command::Unknown(word) => strings::unknown_command(word),
        };
        turns.notice(who, events, text, outcome).await?;
        Ok(())
    }

    /// Whether `user` may change the room's mode: a creator in a room version where
    /// creators outrank every power level (12 and later), or power level 50.
    async fn may_set_mode(&self, room: &RoomId, persona: &UserId, user: &UserId) -> Result<bool, Error> {
        let state = self.matrix.room_state(room, persona).await?;
        let of = |t: &str| state.iter().find(|e| e.get("type").and_then(Value::as_str) == Some(t));
        let create = of("m.room.create");
        let content = create.and_then(|c| c.get("content"));
        let version = content.and_then(|c| c.get("room_version")).and_then(Value::as_str).unwrap_or("1");
        if version.parse::<u32>().is_ok_and(|v| v >= 12) {
            let creator = create.and_then(|c| c.get("sender")).and_then(Value::as_str);
            let additional = content.and_then(|c| c.get("additional_creators")).and_then(Value::as_array);
            let is = |v: &Value| v.as_str() == Some(user.as_str());
            if creator == Some(user.as_str()) || additional.is_some_and(|a| a.iter().any(is)) {
                return Ok(true);
            }
        }
        let levels = of("m.room.power_levels").and_then(|p| p.get("content"));
        let default = levels.and_then(|l| l.get("users_default")).and_then(Value::as_i64).unwrap_or(0);
        let level = levels.and_then(|l| l.get("users")?.get(user.as_str())?.as_i64()).unwrap_or(default);
        Ok(level >= MODE_LEVEL)
    }
}
