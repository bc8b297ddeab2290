//! Answers that say again what the persona said before rather than answer: word for word
//! an earlier answer of the conversation, or only who the persona is, in its prompt's
//! words. A small model imitates its own earlier turns: Qwen2.5-Coder-1.5B, after two
//! refused calls, answered the weather question "I am Richbot (@richbot:localhost)." (its
//! prompt says "You are Richbot (@richbot:localhost)."), and then gave that same answer
//! to each of the next ten questions (the answers benchmark, seed 2). Left to stand, each
//! copy makes the next more likely.

use std::sync::LazyLock;

use regex::Regex;

use crate::agent::Message;
use crate::strings;

/// Words an answer has at least before its repeat counts: "You're welcome!" or "OK." may
/// well answer two messages alike.
const MIN_WORDS: usize = 4;

/// Whether `answer` is word for word (case, punctuation and markup aside) what the
/// persona answered to an earlier message of the conversation that differs from the
/// member's latest one. The same answer to the same words asked again is an answer.
pub(super) fn repeats_an_earlier_answer(answer: &str, messages: &[Message]) -> bool {
    let said = words(answer);
    if said.len() < MIN_WORDS {
        return false;
    }
    let now = words(super::asked(messages));
    let mut question: Option<Vec<String>> = None;
    for message in messages {
        match message {
            Message::User(t) | Message::UserImages { text: t, .. } if !t.starts_with(strings::CORRECTION) => {
                question = Some(words(super::without_note(t)));
            }
            Message::Assistant { text: Some(t), .. }
                if words(t) == said && question.as_ref().is_some_and(|q| *q != now) =>
            {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// Whether `answer` is only the persona saying who it is, in the shape of its prompt's
/// "You are NAME (@id:server)" ("I am Richbot (@richbot:localhost)."), and `asked` does
/// not ask who or what it is.
pub(super) fn only_introduces_itself(answer: &str, asked: &str) -> bool {
    static INTRODUCTION: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^((hello|hi|hey)[,!.]?\s+)?(i am|i'm|this is|my name is)\s+[^\n]{1,60}?\(@[^)\s]+:[^)\s]+\)\s*[.!]?$",
        )
        .expect("a valid regex")
    });
    static ASKS_WHO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\b(who|names?|yourself|introduce|what are you|are you)\b").expect("a valid regex")
    });
    INTRODUCTION.is_match(crate::render::plain_text(answer).trim()) && !ASKS_WHO.is_match(asked)
}

/// The words of `text` as a member reads it, lower-cased.
fn words(text: &str) -> Vec<String> {
    crate::render::plain_text(text)
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Message;

    fn said(text: &str) -> Message {
        Message::Assistant { text: Some(text.to_owned()), tool_calls: Vec::new() }
    }

    fn member(text: &str) -> Message {
        Message::User(format!("@alice:x: {text}"))
    }

    const INTRO: &str = "I am Richbot (@richbot:localhost).";

    #[test]
    fn an_earlier_answer_given_again_to_another_question_is_a_repeat() {
        let messages =
            [member("What's the weather like in Porto today?"), said(INTRO), member("Give me a pancake recipe.")];
        assert!(repeats_an_earlier_answer(INTRO, &messages));
        assert!(repeats_an_earlier_answer("**I am Richbot** (@richbot:localhost)", &messages), "markup aside");
    }

    #[test]
    fn the_same_answer_to_the_same_question_or_a_short_one_is_no_repeat() {
        let again = [member("What is 2+2?"), said("Two plus two is four."), member("what is 2 + 2")];
        assert!(!repeats_an_earlier_answer("Two plus two is four.", &again), "asked again");
        let thanks = [member("Thanks!"), said("You're welcome!"), member("Thank you so much")];
        assert!(!repeats_an_earlier_answer("You're welcome!", &thanks), "too short to be a repeat");
        let new = [member("Weather?"), said("It is sunny in Porto."), member("And tomorrow?")];
        assert!(!repeats_an_earlier_answer("It will rain in Porto tomorrow.", &new), "a new answer");
    }

    #[test]
    fn a_correction_between_is_not_the_question() {
        let messages = [
            member("Weather?"),
            said("It is sunny in Porto today."),
            member("Chart these sales: Jan 120, Feb 135."),
            Message::User(strings::CORRECT_EMPTY.to_owned()),
        ];
        assert!(repeats_an_earlier_answer("It is sunny in Porto today.", &messages));
    }

    #[test]
    fn the_review_sends_a_repeat_or_an_introduction_back_and_ends_quietly_after_a_posted_message() {
        use super::super::{Review, Verdict};
        use crate::agent::{Reply, ToolCall};
        let reply = |t: &str| Reply { text: Some(t.to_owned()), ..Reply::default() };
        let review = Review::default();
        let weather = [member("What's the weather like in Porto today?")];
        assert_eq!(
            review.judge(&reply(INTRO), &weather, &[]),
            Verdict::Correct(strings::CORRECT_INTRODUCTION.to_owned())
        );
        let history = [weather[0].clone(), said(INTRO), member("Give me a simple pancake recipe.")];
        let correction = strings::correct_repeat("@alice:x: Give me a simple pancake recipe.");
        assert_eq!(Review::default().judge(&reply(INTRO), &history, &[]), Verdict::Correct(correction));
        let mut posted = history.to_vec();
        posted.push(Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "rich_send", "{}")] });
        posted.push(Message::Tool { call_id: "c".into(), content: r#"{"event_id":"$t"}"#.into() });
        assert_eq!(Review::default().judge(&reply(INTRO), &posted, &[]), Verdict::Show(strings::NO_REPLY.into()));
        // Said again after the corrections, an introduction is posted; a repeat is not.
        let stubborn = Review::default();
        for _ in 0..super::super::CORRECTIONS {
            assert!(matches!(stubborn.judge(&reply(INTRO), &weather, &[]), Verdict::Correct(_)));
        }
        assert_eq!(stubborn.judge(&reply(INTRO), &weather, &[]), Verdict::Replace(INTRO.to_owned()));
        for _ in 0..super::super::CORRECTIONS {
            assert!(matches!(stubborn.judge(&reply(INTRO), &history, &[]), Verdict::Replace(_)));
        }
        assert_eq!(
            stubborn.judge(&reply(INTRO), &history, &[]),
            Verdict::Replace(strings::COULD_NOT_ANSWER.to_owned())
        );
    }

    #[test]
    fn only_saying_who_it_is_answers_no_other_question() {
        assert!(only_introduces_itself(INTRO, "@alice:x: What's the weather like in Porto today?"));
        assert!(only_introduces_itself("Hi! I'm Helper (@rb_helper:localhost)", "@alice:x: a recipe please"));
        assert!(!only_introduces_itself(INTRO, "@alice:x: Who are you?"), "asked who");
        assert!(!only_introduces_itself(INTRO, "@alice:x: What's your name?"), "asked its name");
        assert!(
            !only_introduces_itself("I am Richbot (@richbot:localhost). Porto is sunny today.", "@alice:x: weather?"),
            "an answer that starts with it is an answer"
        );
        assert!(!only_introduces_itself("I am sure it will rain.", "@alice:x: weather?"));
    }
}
