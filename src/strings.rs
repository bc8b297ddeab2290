//! Sentences room members see, in one place.

/// What the model says when its rich message said it all.
pub const NO_REPLY: &str = "[no reply]";

/// Posted when the LLM fails for good (after its retries).
pub const LLM_FAILED: &str =
    "Sorry, I can't reach my language model right now, so I couldn't answer that. Please try again in a little while.";

/// Posted when the model kept calling tools past the round limit.
pub const TOO_MANY_ROUNDS: &str = "Sorry, I couldn't finish that answer. Please try asking again, perhaps more simply.";
