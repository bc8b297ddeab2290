//! Sentences room members see, in one place. richbot's own status, error and limit
//! messages go out as `m.notice`, which bots (richbot included) never answer. What
//! richbot tells the model (its corrections) is in `model`.

mod echo;
mod model;
pub use echo::repeats_richbot;
pub use model::*;

/// What the model says when its rich message said it all.
pub const NO_REPLY: &str = "[no reply]";

/// Whether the model's text is the no-reply marker, in any case: small models copy it
/// as `[No reply]` (or `[No reply.]`) as often as not.
pub fn is_no_reply(text: &str) -> bool {
    // `[No reply.]`, `[no reply]!`: the marker with stray punctuation is still the marker.
    let t: String = text.trim().chars().filter(|c| !matches!(c, '.' | '!')).collect();
    t.trim().eq_ignore_ascii_case(NO_REPLY)
}

/// Posted when the LLM fails for good (after its retries).
pub const LLM_FAILED: &str =
    "Sorry, I can't reach my language model right now, so I couldn't answer that. Please try again in a little while.";

/// Posted when the LLM endpoint refuses richbot's configuration (its key, its URL).
pub const MISCONFIGURED: &str = "Sorry, I can't answer: my connection to my language model is misconfigured. \
     The admin has been told; trying again won't help until they fix it.";

/// Posted when the model kept calling tools past the round limit.
pub const TOO_MANY_ROUNDS: &str = "Sorry, I couldn't finish that answer. Please try asking again, perhaps more simply.";

/// Ends a streamed answer that stopped part-way.
/// Said once per room when a member sends a picture to a persona whose model cannot see.
pub const NO_VISION: &str = "I can't see pictures: my language model reads only text. \
     If the picture matters, please describe it in words.";

pub const CUT_SHORT: &str = "_(This answer was cut short: my language model stopped part-way.)_";

/// Ends a live message whose final edit was refused; the answer goes on in new messages.
pub const CONTINUED_BELOW: &str = "_(continued below)_";

/// Posted when (part of) an answer could not be posted for good.
pub const POST_FAILED: &str =
    "Sorry, I couldn't post all of my answer: the server refused it. Please ask again, perhaps for a shorter answer.";

/// Why a persona declines an invite past `limits.rooms_per_inviter` (`n`).
pub fn too_many_rooms_from(n: u64) -> String {
    format!(
        "I'm already in {n} rooms you invited me to, which is as many as I join for one person. Leave one with me in it, or ask an admin."
    )
}

/// Why a persona declines an invite past `limits.rooms_total`.
pub const TOO_MANY_ROOMS: &str =
    "I'm in as many rooms as this deployment allows, so I can't join another now. Please ask an admin.";

/// Posted when a turn ran past its deadline.
pub const DEADLINE: &str = "Sorry, that took too long, so I stopped. Please try again, perhaps with a simpler request.";

/// Why a persona cancels an interactive verification request (the member's client shows it).
pub const NO_VERIFICATION: &str = "richbot's devices are cross-signed by its own identity; it cannot verify interactively. \
Check its identity's key with your homeserver's admin instead.";

/// Posted once in an encrypted room when encryption is off (or the homeserver does not
/// support it).
pub const ENCRYPTED: &str = "This room is encrypted, and I can't read encrypted messages here, so I can't answer. \
     Please talk to me in an unencrypted room or direct chat.";

/// Posted (at most once an hour per room) when an encrypted message's key never came.
pub const UNDECRYPTABLE: &str = "I couldn't read your last message; it was encrypted for devices I don't have.";

/// Posted when an answer could not be delivered before `bot.delivery_deadline_secs`.
pub const UNDELIVERED: &str = "Sorry, I lost an answer to you: I couldn't reach the server to post it for too long. \
     Please ask again.";

/// Posted once after an outage, in a room whose questions arrived too late to answer.
pub const AWAY: &str =
    "I was away and missed messages sent while I was offline. Please ask again if you still need an answer.";

/// Posted when a room's turn bucket ran dry.
pub fn room_cooling(minutes: u64) -> String {
    format!(
        "I'm getting more messages in this room than I can answer, so I'm pausing here for {minutes} minute(s). \
         Messages sent meanwhile won't be answered."
    )
}

/// Posted when an asker's turn bucket ran dry.
pub fn asker_cooling(asker: &str, minutes: u64) -> String {
    format!(
        "{asker}, you've asked me a lot in a short time, so I'm pausing my answers to you for {minutes} minute(s). \
         Messages sent meanwhile won't be answered."
    )
}

/// Posted once when a token budget is spent. `which`: "your", "this room's", "everyone's".
pub fn budget_spent(which: &str, limit: u64, refills_at: &str) -> String {
    format!(
        "I've used up {which} daily allowance ({limit} tokens a day), so I can't answer right now. \
         It refills by {refills_at}."
    )
}

/// The answer to `!usage`: `used` is (tokens as the budget counts them, turns, prompt
/// tokens, of which cached).
pub fn usage(asker: &str, tokens: u64, turns: u64, prompt: u64, cached: u64, limit: Option<u64>) -> String {
    let limit = match limit {
        Some(n) => format!("Your limit is {n} tokens a day."),
        None => "You have no personal limit.".to_owned(),
    };
    let prompt = if prompt > 0 {
        format!(
            " Of the {prompt} prompt tokens, {cached} were reused from the model server's cache and {} read afresh.",
            prompt.saturating_sub(cached)
        )
    } else {
        String::new()
    };
    format!("{asker}: over the last 24 hours you used {tokens} tokens in {turns} turn(s).{prompt} {limit}")
}

/// What `!usage` adds when voice messages are heard: the seconds heard over the day, and
/// the limit (none when the asker has none).
pub fn voice_usage(seconds: u64, limit: Option<u64>) -> String {
    match limit {
        Some(n) => format!(" Voice messages: {seconds} s heard, of your {n} s a day."),
        None => format!(" Voice messages: {seconds} s heard, with no limit."),
    }
}

/// The answer to `!help`.
pub fn help(persona: &str) -> String {
    format!(
        "I'm {persona}, an assistant that answers with rich messages (tables, weather, charts, trackers, cards, code). \
         In a direct chat, just write; in a room, mention me or reply to me.\n\n\
         Commands: `!help` (this), `!reset` (forget the conversation so far), \
         `!mode thread|reply|flat` (how I answer in this room; power level 50), `!usage` (your use today), \
         `!schedules` (your reminders and schedules here), `!unschedule <id>` (cancel one), \
         `!timezone Europe/Lisbon` (the zone I write your times in).\n\n\
         Ask me for reminders in words: \"remind me tomorrow at 9\", \"every Monday at 9:00 post the sprint summary\"."
    )
}

/// The note before a scheduled message that fires late (richbot was away at its time).
pub fn schedule_late(due: &str) -> String {
    format!("⏰ Late: this was due {due}, while I was away.")
}

/// Told in the asker's DM when their schedule is stopped because its posts keep failing.
pub fn schedule_stopped_failing(id: i64, title: Option<&str>, room: &ruma::RoomId, failures: i64) -> String {
    let named = title.map(|t| format!(" ({t})")).unwrap_or_default();
    format!(
        "⏰ I stopped your schedule #{id}{named}: its last {failures} messages to {room} could not be posted there. \
         Make it again when I can post there."
    )
}

/// Told in the asker's DM when their scheduled rich message shows media they may not show.
pub fn schedule_stopped_media(id: i64, title: Option<&str>) -> String {
    let named = title.map(|t| format!(" ({t})")).unwrap_or_default();
    format!(
        "⏰ I stopped your schedule #{id}{named}: its message shows a picture or file that was not posted in a room \
         you are in, so I won't post it."
    )
}

/// Confirms `!reset`.
pub const RESET: &str =
    "Done: I've set aside our conversation so far. It's still stored, but I won't use it from here on.";

/// `!mode` in a DM.
pub const MODE_DM: &str = "`!mode` is for group rooms; in a direct chat I answer plainly.";

/// The room's mode, for `!mode`.
pub fn mode_is(mode: &str) -> String {
    format!("In this room I answer {}. Change it with `!mode thread|reply|flat` (power level 50).", mode_words(mode))
}

/// Confirms `!mode <mode>`.
pub fn mode_set(mode: &str) -> String {
    format!("From now on I answer {} in this room.", mode_words(mode))
}

/// `!mode` from someone who may not change it.
pub fn mode_refused(level: i64) -> String {
    format!("Only members with power level {level} or more (or the room's creators) can change how I answer here.")
}

/// `!reset` in a group room from someone who may not forget everyone's conversation.
pub fn reset_refused(level: i64) -> String {
    format!(
        "In a group room `!reset` sets aside everyone's conversation, so it takes power level {level} or more \
         (or being one of the room's creators)."
    )
}

/// `!mode` with a mode that does not exist.
pub fn mode_unknown(mode: &str) -> String {
    format!("There is no mode \"{mode}\": use `!mode thread`, `!mode reply` or `!mode flat`.")
}

fn mode_words(mode: &str) -> &'static str {
    match mode {
        "thread" => "in a thread under each question",
        "flat" => "plainly, without replying",
        _ => "as a reply to each question",
    }
}

/// An unknown `!command`.
pub fn unknown_command(word: &str) -> String {
    let word: String = word.chars().take(40).collect();
    format!("I don't know `!{word}`. Commands: `!help`, `!reset`, `!mode thread|reply|flat`, `!usage`.")
}

/// The tool error for a call cut off by the reply's token limit (`finish_reason: "length"`).
pub const CUT_OFF: &str = "your call was cut off: the reply reached its token limit before the arguments ended, so \
     it was not run; send a shorter one (a smaller payload, a shorter fallback)";

/// The tool error for a call the model server could not read (llama.cpp's 500 "Failed to
/// parse tool call arguments").
pub const UNREADABLE: &str = "the model server could not read your tool call (its arguments were cut off at the \
     token limit, or were not valid JSON), so it was not run; send one shorter call, or answer in text";

/// The tool error for a call the model made before in the same turn.
pub const REPEATED: &str = "you made this exact call before in this turn, and its result is above; it was not run \
     again. Do not repeat it: answer in text, or make a different call";

/// Told to the member when the model's calls kept being cut off and the turn ended
/// without an answer.
pub const MODEL_CUT_OFF: &str =
    "Sorry, my language model's answer was cut off before it was complete. Please try asking more simply.";

/// Told to the member when the model kept making the same call and the turn ended
/// without an answer.
pub const MODEL_REPEATING: &str =
    "Sorry, my language model got stuck repeating the same step, so I stopped. Please try asking more simply.";

/// Shown on an answer while a tool it called runs long.
pub fn running(tool: &str) -> String {
    format!("(running `{tool}`…)")
}

/// Lower-case words, punctuation and symbols dropped: "Yes, book it!" is "yes book it".
/// How a member's typed answer is matched against a button's label or a poll's answer.
pub fn words(s: &str) -> String {
    let kept: String =
        s.chars().map(|c| if c.is_alphanumeric() { c } else { ' ' }).flat_map(char::to_lowercase).collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Told once per room and hour when a voice message arrives and the persona cannot listen.
pub const CANNOT_LISTEN: &str = "🎤 I can't listen to voice messages here, so I only know that you sent one. \
     Please type your question.";

/// Told when a voice message is longer than `transcription.max_seconds`.
pub fn voice_too_long(seconds: u64, max: u64) -> String {
    format!(
        "🎤 Your voice message is {seconds} s long; I listen to at most {max} s. Please send a shorter one, or type it."
    )
}

/// Told when a voice message is larger than `transcription.max_bytes`.
pub fn voice_too_large(bytes: u64, max: usize) -> String {
    format!(
        "🎤 Your voice message is {} KiB; I listen to at most {} KiB. Please send a shorter one, or type it.",
        bytes.div_ceil(1024),
        max / 1024
    )
}

/// Told when a voice message holds more than it says (its `info.duration`, or its size
/// for the seconds it states).
pub fn voice_not_as_stated(stated_seconds: u64, held: &str) -> String {
    format!(
        "🎤 Your voice message says it is {stated_seconds} s long, but {held}. I only listen to messages that are \
         what they say; please record it again, or type it."
    )
}

/// Told when a voice message is of a kind whose length richbot cannot measure.
pub fn voice_unmeasurable(why: &str) -> String {
    format!("🎤 I can't listen to this audio: {why}. Please send a voice message, or type it.")
}

/// Told when the asker's `budget.audio_seconds_per_day` has no room for a voice message.
pub fn voice_budget_spent(limit: u64) -> String {
    format!(
        "🎤 You have used today's {limit} s of voice messages I listen to; they come back over the next day. \
         Please type your question until then."
    )
}

/// Told when the transcription endpoint is down or failed.
pub const VOICE_FAILED: &str = "🎤 I couldn't make out your voice message: my transcription service is not \
     answering. I answered without it; please try again later, or type it.";

/// Told when the transcription endpoint refuses the key or has no such path.
pub const VOICE_MISCONFIGURED: &str = "🎤 I couldn't make out your voice message: my connection to my \
     transcription service is misconfigured. The admin has been told; please type your question.";

/// Told to the member when a call of the turn did something (a reminder set) and the
/// model never said so in words it could post: short, and true.
pub const DONE_UNSAID: &str = "Done.";

/// What the member reads when the model gave no answer fit to post, after its corrections.
pub const COULD_NOT_ANSWER: &str = "I couldn't put an answer together this time. Please ask again, perhaps in \
     other words.";

/// What the member reads when the model kept saying it did what no tool did.
pub const PROMISE_NOT_KEPT: &str = "I couldn't do that just now: nothing was set up or sent. Please ask again.";

/// What a live message says when the answer it showed was sent back to the model and no
/// later answer took its place.
pub const WITHDRAWN: &str = "_(answer withdrawn)_";

/// Whether a message of the persona's is a withdrawn answer, as written or as its body.
pub fn is_withdrawn(text: &str) -> bool {
    let t = text.trim();
    t == WITHDRAWN || t == WITHDRAWN.trim_matches('_')
}

/// Whether a message of the persona's is richbot's stand-in for an answer the model did
/// not give: a withdrawn answer, or the honest sentence posted instead. None is the
/// model's own words, and a model shown one imitates it (after "I couldn't put an answer
/// together", the benchmark's model declined the next three questions).
pub fn is_stand_in(text: &str) -> bool {
    let t = text.trim();
    is_withdrawn(t) || t == COULD_NOT_ANSWER || t == PROMISE_NOT_KEPT
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_no_reply_marker_is_read_as_small_models_write_it() {
        for marker in ["[no reply]", " [No reply] ", "[NO REPLY]", "[No reply.]", "[no reply]!"] {
            assert!(super::is_no_reply(marker), "{marker:?}");
        }
        for answer in ["no reply", "[no reply] Sure, here it is.", "[reply]", ""] {
            assert!(!super::is_no_reply(answer), "{answer:?}");
        }
    }

    #[test]
    fn a_withdrawn_answer_is_known_as_written_and_as_its_body() {
        assert!(super::is_withdrawn(super::WITHDRAWN));
        assert!(super::is_withdrawn(" (answer withdrawn) "));
        assert!(!super::is_withdrawn("The answer was withdrawn by the author."));
    }
}
