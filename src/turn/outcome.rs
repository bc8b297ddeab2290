//! How a turn ended: one enum, stored in `turns.outcome` as text (`answered`,
//! `llm_failed: <reason>`) and read back with a fallible `FromStr`, so a kind is spelled in
//! one place and metrics count by [`Outcome::kind`].

use std::fmt;
use std::str::FromStr;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The model's answer was posted (as text, or through its tools).
    Answered,
    /// The model chose not to answer in text (`[no reply]`, or nothing after its tools).
    NoReply,
    /// The model kept calling tools past the round limit; the person was told.
    MaxRounds,
    /// The model misbehaved (its calls kept being cut off, or it repeated the same call):
    /// the turn ended early with what it had, the cause logged at WARN, and the person
    /// told unless it had answered already.
    Unfinished(String),
    /// The LLM failed for good; the person was told.
    LlmFailed(String),
    /// The LLM endpoint refused the configuration (key, URL); the admin's fix is logged and
    /// the person was told the bot is misconfigured.
    Misconfigured(String),
    /// The answer could not be posted (refused, unavailable, or too large).
    PostFailed(String),
    /// The turn ran past its deadline; the person was told.
    Deadline,
    /// The answer could not be delivered before the delivery deadline; the person was told.
    Undelivered,
    /// A token budget (`user`, `room`, `deployment`) had no room for the call; the LLM was
    /// not called, and the person was told (once until it refills).
    BudgetSpent(String),
    /// A turn rate limit tripped; the room or asker was told it cools down.
    RateLimited,
    /// Questions arrived too late (an outage); the room was told to ask again.
    Away,
    /// A conversation command was answered (its name).
    Command(String),
    /// The room is encrypted; the persona said it cannot read it.
    Encrypted,
    /// An encrypted message could not be read (its key never came); the room was told.
    Undecryptable,
    /// The turn's persona is no longer configured.
    PersonaRemoved,
    /// A persona greeted the room it joined.
    Greeted,
    /// The greeting could not be posted.
    GreetingFailed(String),
    /// A schedule's message was posted at its time.
    Scheduled,
}

impl Outcome {
    /// The kind without its detail: what metrics count by.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::NoReply => "no_reply",
            Outcome::MaxRounds => "max_rounds",
            Outcome::Unfinished(_) => "unfinished",
            Outcome::LlmFailed(_) => "llm_failed",
            Outcome::Misconfigured(_) => "misconfigured",
            Outcome::PostFailed(_) => "post_failed",
            Outcome::Deadline => "deadline",
            Outcome::Undelivered => "undelivered",
            Outcome::BudgetSpent(_) => "budget_spent",
            Outcome::RateLimited => "rate_limited",
            Outcome::Away => "away",
            Outcome::Command(_) => "command",
            Outcome::Encrypted => "encrypted",
            Outcome::Undecryptable => "undecryptable",
            Outcome::PersonaRemoved => "persona_removed",
            Outcome::Greeted => "greeted",
            Outcome::GreetingFailed(_) => "greeting_failed",
            Outcome::Scheduled => "scheduled",
        }
    }

    fn detail(&self) -> Option<&str> {
        match self {
            Outcome::LlmFailed(d)
            | Outcome::Misconfigured(d)
            | Outcome::PostFailed(d)
            | Outcome::GreetingFailed(d)
            | Outcome::BudgetSpent(d)
            | Outcome::Unfinished(d)
            | Outcome::Command(d) => Some(d),
            Outcome::Answered
            | Outcome::NoReply
            | Outcome::MaxRounds
            | Outcome::Deadline
            | Outcome::Undelivered
            | Outcome::RateLimited
            | Outcome::Away
            | Outcome::Encrypted
            | Outcome::Undecryptable
            | Outcome::PersonaRemoved
            | Outcome::Greeted
            | Outcome::Scheduled => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.detail() {
            Some(detail) => write!(f, "{}: {detail}", self.kind()),
            None => f.write_str(self.kind()),
        }
    }
}

/// A stored outcome that is not one this version knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown turn outcome \"{0}\"")]
pub struct UnknownOutcome(pub String);

impl FromStr for Outcome {
    type Err = UnknownOutcome;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, detail) = match s.split_once(": ") {
            Some((k, d)) => (k, d.to_owned()),
            None => (s, String::new()),
        };
        Ok(match kind {
            "answered" => Outcome::Answered,
            "no_reply" => Outcome::NoReply,
            "max_rounds" => Outcome::MaxRounds,
            "unfinished" => Outcome::Unfinished(detail),
            "llm_failed" => Outcome::LlmFailed(detail),
            "misconfigured" => Outcome::Misconfigured(detail),
            "post_failed" => Outcome::PostFailed(detail),
            "deadline" => Outcome::Deadline,
            "undelivered" => Outcome::Undelivered,
            "budget_spent" => Outcome::BudgetSpent(detail),
            "rate_limited" => Outcome::RateLimited,
            "away" => Outcome::Away,
            "command" => Outcome::Command(detail),
            "encrypted" => Outcome::Encrypted,
            "undecryptable" => Outcome::Undecryptable,
            "persona_removed" => Outcome::PersonaRemoved,
            "greeted" => Outcome::Greeted,
            "greeting_failed" => Outcome::GreetingFailed(detail),
            "scheduled" => Outcome::Scheduled,
            _ => return Err(UnknownOutcome(s.to_owned())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_through_their_text() {
        let all = [
            Outcome::Answered,
            Outcome::NoReply,
            Outcome::MaxRounds,
            Outcome::Unfinished("the model made the same rich_send call 3 times".into()),
            Outcome::LlmFailed("LLM request failed: timed out: a: b".into()),
            Outcome::Misconfigured("does llm.base_url end in /v1?".into()),
            Outcome::PostFailed("M_FORBIDDEN (403): no".into()),
            Outcome::Deadline,
            Outcome::Undelivered,
            Outcome::BudgetSpent("user".into()),
            Outcome::RateLimited,
            Outcome::Away,
            Outcome::Command("usage".into()),
            Outcome::Encrypted,
            Outcome::Undecryptable,
            Outcome::PersonaRemoved,
            Outcome::Greeted,
            Outcome::GreetingFailed("homeserver unavailable: 502".into()),
            Outcome::Scheduled,
        ];
        for outcome in all {
            let text = outcome.to_string();
            assert!(text.starts_with(outcome.kind()), "{text}");
            assert_eq!(text.parse::<Outcome>(), Ok(outcome));
        }
        assert_eq!("exploded".parse::<Outcome>(), Err(UnknownOutcome("exploded".into())));
        assert_eq!("llm_failed: x".parse::<Outcome>().map(|o| o.kind()), Ok("llm_failed"));
    }
}
