//! Whether an answer repeats richbot's own words to the model. A small model corrected
//! once often answers with the correction itself: Qwen2.5-Coder-1.5B, told its answer
//! repeated a tool's result, answered the member "Your last answer repeated a tool's
//! result, which is for you, not the member. Please ask me a new question." (the answers
//! benchmark, the comparison table). The member never asked anything of the sort, and the
//! words are richbot's, not the persona's.
//!
//! A copy is [`RUN`] words in a row shared with a correction (case, punctuation and
//! typographic apostrophes aside), or the corrections' own `(richbot)` tag. Seven words
//! of these sentences ("your last answer repeated a tool's result") are not what an
//! answer to a member says; six would start to catch ordinary phrases ("in plain words,
//! or with a" diagram).

use std::collections::HashSet;

use super::model::{
    CORRECT_BABBLE, CORRECT_BARE_NO_REPLY, CORRECT_DEFERRED, CORRECT_ECHO, CORRECT_EMPTY, CORRECT_INTRODUCTION,
    CORRECT_MEMBER_CANNOT_CALL, CORRECT_SILENT, CORRECT_TOOL_RESULT, CORRECT_WRITTEN_CALL, CORRECTION, correct_promise,
    correct_repeat, correct_unasked, fill_call,
};

/// Words in a row that make a copy.
pub const RUN: usize = 7;

/// Whether `answer` repeats one of `said` (richbot's corrections this turn), or any of
/// richbot's corrections as written.
pub fn repeats_richbot<'a>(answer: &str, said: impl IntoIterator<Item = &'a str>) -> bool {
    if answer.contains(CORRECTION.trim_end()) {
        return true;
    }
    let words = words_of(answer);
    if words.len() < RUN {
        return false;
    }
    let ours: HashSet<Vec<String>> = said
        .into_iter()
        .map(str::to_owned)
        .chain(corrections())
        .flat_map(|c| words_of(&c).windows(RUN).map(<[String]>::to_vec).collect::<Vec<_>>())
        .collect();
    words.windows(RUN).any(|run| ours.contains(run))
}

/// Every correction richbot writes, the formatted ones with sample names.
fn corrections() -> Vec<String> {
    let mut all: Vec<String> = [
        CORRECT_WRITTEN_CALL,
        CORRECT_EMPTY,
        CORRECT_BABBLE,
        CORRECT_TOOL_RESULT,
        CORRECT_BARE_NO_REPLY,
        CORRECT_DEFERRED,
        CORRECT_MEMBER_CANNOT_CALL,
        CORRECT_ECHO,
        CORRECT_SILENT,
        CORRECT_INTRODUCTION,
    ]
    .map(str::to_owned)
    .to_vec();
    all.push(correct_promise("set a reminder", "schedule", true));
    all.push(correct_promise("set a reminder", "schedule", false));
    all.push(correct_unasked("schedule", "a reminder"));
    all.push(fill_call("schedule", "at, message"));
    all.push(correct_repeat("What is the weather like?"));
    all
}

/// The words of `text`, lower-cased, apostrophes kept inside words (`’` read as `'`).
fn words_of(text: &str) -> Vec<String> {
    text.to_lowercase()
        .replace('’', "'")
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '_'))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correction_repeated_as_the_answer_is_a_copy_and_ordinary_answers_are_not() {
        // The benchmark's answer to "Compare Python, Rust and Go for web backends in a table."
        let copied = "Your last answer repeated a tool’s result, which is for you, not the member. Please ask me \
                      a new question.";
        assert!(repeats_richbot(copied, []));
        assert!(repeats_richbot("(richbot) Sure, here it is.", []), "the tag");
        let said = "(richbot) Your answer says you sent a poll, but no rich_poll call succeeded in this turn";
        assert!(repeats_richbot("Your answer says you sent a poll, but nothing happened.", [said]), "this turn's");
        for answer in [
            "Here is a table comparing Python, Rust and Go for web backends.",
            "You can answer in plain words or with a diagram.",
            "Rust is fast; Go is simple; Python has the most libraries.",
            "Tell the member",
            "",
        ] {
            assert!(!repeats_richbot(answer, []), "{answer:?}");
        }
    }
}
