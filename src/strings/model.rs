//! What richbot itself tells the model: corrections of an answer it will not post, the
//! words its tools' results add, and the request for a promised call's arguments. Each
//! starts `(richbot)` (a user turn no member wrote) or sits inside a tool result. What
//! members read is in the parent module.

/// How a correction to the model starts (a user turn richbot writes, not a member).
pub const CORRECTION: &str = "(richbot) ";

/// Told to the model when its answer was a tool call written as text that could not be read.
pub const CORRECT_WRITTEN_CALL: &str = "(richbot) Your last answer wrote a tool call as text, and it could not be \
     read or named no tool you have, so nothing was done and nothing was posted. Make the call itself with one of \
     your tools (block types such as weather or table are not tools: they go in rich_send's payload), or answer in \
     plain words.";

/// In `rich_send`'s result: the message is out (small models otherwise thank the member
/// for the event id, or post the message's text again).
pub const POSTED: &str = "It is in the room now. If it said everything, reply exactly [no reply].";

/// In `schedule`'s result: small models otherwise end the turn with nothing said, and the
/// member does not know the reminder is set.
pub const SCHEDULED: &str = "Set. Tell the member in one short sentence what will happen, and when.";

/// Told to the model when its answer was empty once the notes it copied were taken out.
pub const CORRECT_EMPTY: &str = "(richbot) Your last answer was empty (notes and ids are taken out of answers). \
     Answer the member in plain words, or with a tool call.";

/// Told to the model when its answer was word salad (`agent::Odds`), which it is not
/// shown again.
pub const CORRECT_BABBLE: &str = "(richbot) Your last answer came out garbled, so it was not posted. Answer the \
     member's last message again: in plain, short sentences, or with a tool call.";

/// Told to the model when its answer was a tool's result (richbot's JSON), copied.
pub const CORRECT_TOOL_RESULT: &str = "(richbot) Your last answer repeated a tool's result, which is for you, not \
     the member. If it is an error, make the call again as it says; else tell the member in plain words.";

/// Told to the model when its answer repeated one of these corrections (`repeats_richbot`).
pub const CORRECT_ECHO: &str = "(richbot) Your last answer repeated richbot's note to you, which the member never \
     sees. Reply to the member's own last message instead.";

/// Told to the model when it answered `[no reply]` in a DM before anything was posted.
pub const CORRECT_SILENT: &str = "(richbot) This is a direct chat: the member wrote to you, and [no reply] \
     leaves them with nothing. Answer them in words (a short answer is fine) or with a tool call.";

/// Told to the model when its whole answer was who it is, in its prompt's words ("I am
/// Richbot (@richbot:localhost).") to a member who asked something else.
pub const CORRECT_INTRODUCTION: &str = "(richbot) Your last answer only said who you are, which the member did not \
     ask. Answer the member's own last message, in words or with a tool call.";

/// Told to the model when its answer was word for word its answer to an earlier, other
/// message of the member's (`asked`: the member's latest words).
pub fn correct_repeat(asked: &str) -> String {
    format!(
        "(richbot) Your last answer was word for word what you answered to an earlier message, and the member \
         now wrote something else: \"{}\". Answer that, in words or with a tool call.",
        asked.trim().chars().take(300).collect::<String>()
    )
}

/// Told to the model when it answered "No reply." before anything was posted.
pub const CORRECT_BARE_NO_REPLY: &str = "(richbot) \"No reply.\" would be posted to the member as it is. Answer \
     them in words, or answer exactly [no reply] to post nothing.";

/// Told to the model when its answer only asks the member to wait: nothing follows it.
pub const CORRECT_DEFERRED: &str = "(richbot) Nothing runs after your answer: no one comes back to the member \
     once it is posted. Answer now with what you know (a tool call first, if one can help), or say plainly that you \
     cannot; do not ask them to wait.";

/// Told to the model when its answer sends the member to a function or tool.
pub const CORRECT_MEMBER_CANNOT_CALL: &str = "(richbot) The member cannot call functions or tools; only you can. \
     Make the call yourself (a block goes in rich_send's payload), or answer in plain words; if you do not know \
     the facts (live weather, prices), say so.";

/// Told to the model when its answer says it did what only `tool` does, and no `tool` call
/// succeeded.
pub fn correct_promise(what: &str, tool: &str, asked: bool) -> String {
    if asked {
        return format!(
            "(richbot) The member asked for what only {tool} does, and no {tool} call succeeded in this turn, so \
             nothing was done. Call {tool} now, or tell the member plainly that you cannot."
        );
    }
    format!(
        "(richbot) Your answer says you {what}, but no {tool} call succeeded in this turn, so nothing was done. Call \
         {tool} now, or tell the member plainly that it was not done."
    )
}

/// Told to the model when it wrote a call of `tool` as text that the member did not ask
/// for (`does`: what it would have done): it was not run.
pub fn correct_unasked(tool: &str, does: &str) -> String {
    format!(
        "(richbot) You wrote a {tool} call as text, and it was not run: the member did not ask for {does}. Answer \
         what they asked, in words or with rich_send."
    )
}

/// Asked of the model, for its output held to the call's schema, when the member asked for
/// what only `tool` does and its answer did not call it: `fields` say what to fill in.
pub fn fill_call(tool: &str, fields: &str) -> String {
    format!(
        "(richbot) No {tool} call was made, so nothing was done yet. Write the arguments of the {tool} call that \
         does what the member asked, as one JSON object: {fields}."
    )
}
