//! What a conversation command is, parsed from a message's body. Pure: the triggers use it
//! to tell a command from a question, and `commands` answers it.

use ruma::UserId;

/// The answer modes of a group room.
pub const MODES: &[&str] = &["thread", "reply", "flat"];
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
    /// The asker's schedules in the room (everyone's, for those who may set the mode).
    Schedules,
    /// Cancel a schedule (its id as typed).
    Unschedule(String),
    /// Show (`None`) or set the asker's time zone.
    Timezone(Option<String>),
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
            Command::Schedules => "schedules",
            Command::Unschedule(_) => "unschedule",
            Command::Timezone(_) => "timezone",
            Command::Unknown(w) => w,
        }
    }
}

/// The command of a message: after a leading mention of the persona (`Richbot: !usage`,
/// `@richbot:example.org !mode thread`), a `!word` alone, or `!mode`, `!unschedule` or
/// `!timezone` and its argument. A
/// longer message that starts with `!` is a question, not a command.
pub fn command(body: &str, persona: &UserId, display_name: &str) -> Option<Command> {
    let mut rest = body.trim_start();
    let names = [persona.as_str(), display_name, persona.localpart()];
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
        ("schedules", 1) => Some(Command::Schedules),
        ("unschedule", 2) => Some(Command::Unschedule(words[1].trim_start_matches('#').to_owned())),
        ("timezone", 1) => Some(Command::Timezone(None)),
        ("timezone", 2) => Some(Command::Timezone(Some(words[1].to_owned()))),
        ("help" | "reset" | "usage" | "mode" | "schedules" | "unschedule" | "timezone", _) => None,
        (_, 1) => Some(Command::Unknown(name)),
        _ => None,
    }
}
