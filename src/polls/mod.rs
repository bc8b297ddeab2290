//! Polls (MSC3381, as Element sends and reads them): the persona's poll start and end
//! events, the members' votes read back from the room, and the tally the model is shown at
//! its next turn in the room. Pure, but for the closer (`closer`), which ends a poll at
//! its `end_after_secs`.
//!
//! Counting follows the clients: only responses in the poll's room that refer to it, sent
//! after it started and before it ended; one vote per member, their latest; a latest
//! response naming no answer of the poll is a spoiled vote (it counts for nothing). The
//! model sees an undisclosed poll's results only once it has ended, as members do.
//!
//! Every client shows a poll: it goes with a message that lists its numbered answers
//! (`render::poll_message`), and a member's reply with a number (or an answer's words) to
//! the poll or that message is a vote like a poll response, by the same rules (`chosen`;
//! kept as it arrives, `Store::record_poll_reply`). In a DM a bare number is one too, while
//! the poll is among the persona's last few messages. The result is posted as a message
//! when the poll ends.

mod closer;
mod tally;

use serde_json::{Value, json};

pub use closer::{Closer, count, end};
pub use tally::{Tally, note, tally};

/// The event types: a poll's start, a vote, the end (unstable prefixes first: what
/// clients send today; the stable names are read too).
pub const START: &str = "org.matrix.msc3381.poll.start";
pub const RESPONSE: &str = "org.matrix.msc3381.poll.response";
pub const RESPONSE_STABLE: &str = "m.poll.response";
pub const END: &str = "org.matrix.msc3381.poll.end";

const TEXT: &str = "org.matrix.msc1767.text";

/// A poll's answer ids: "1", "2", ... in order.
pub fn answer_id(index: usize) -> String {
    (index + 1).to_string()
}

/// The answer (its index) that a member's text names: its number ("2", "#2", "2.") or,
/// when `by_name`, its words (case and punctuation ignored, "Pizza!" for "pizza").
pub fn chosen(text: &str, answers: &[String], by_name: bool) -> Option<usize> {
    let t = text.trim();
    if let Some(n) = number(t) {
        return (1..=answers.len()).contains(&n).then(|| n - 1);
    }
    let said = crate::strings::words(t);
    if !by_name || said.is_empty() {
        return None;
    }
    answers.iter().position(|a| crate::strings::words(a) == said)
}

/// The number a text is, alone: "2", "#2", "2." or "2)".
pub fn number(text: &str) -> Option<usize> {
    let t = text.trim();
    let digits = t.strip_prefix('#').unwrap_or(t).trim_end_matches(['.', ')']);
    (!digits.starts_with('+')).then(|| digits.parse().ok()).flatten()
}

/// The plain text of a poll: the question and its numbered answers.
fn as_text(question: &str, answers: &[String]) -> String {
    let mut text = question.to_owned();
    for (i, a) in answers.iter().enumerate() {
        text.push_str(&format!("\n{}. {a}", i + 1));
    }
    text
}

/// A poll start's content: the unstable block Element reads, the stable `m.poll` block,
/// and a text fallback (both forms) for clients that cannot draw polls.
pub fn start_content(question: &str, answers: &[String], disclosed: bool) -> Value {
    let unstable_kind =
        if disclosed { "org.matrix.msc3381.poll.disclosed" } else { "org.matrix.msc3381.poll.undisclosed" };
    let unstable: Vec<Value> = answers.iter().enumerate().map(|(i, a)| json!({"id": answer_id(i), TEXT: a})).collect();
    let stable: Vec<Value> =
        answers.iter().enumerate().map(|(i, a)| json!({"m.id": answer_id(i), "m.text": [{"body": a}]})).collect();
    let text = as_text(question, answers);
    json!({
        START: {
            "question": {TEXT: question, "body": question, "msgtype": "m.text"},
            "kind": unstable_kind,
            "max_selections": 1,
            "answers": unstable,
        },
        "m.poll": {
            "question": {"m.text": [{"body": question}]},
            "kind": if disclosed { "m.disclosed" } else { "m.undisclosed" },
            "max_selections": 1,
            "answers": stable,
        },
        TEXT: text,
        "m.text": [{"body": text}],
    })
}

/// A poll end's content, referring to `poll`, with the result in words.
pub fn end_content(poll: &str, result: &str) -> Value {
    let text = format!("The poll has ended. {result}");
    json!({
        "m.relates_to": {"rel_type": "m.reference", "event_id": poll},
        END: {},
        "m.poll.end": {},
        TEXT: text,
        "m.text": [{"body": text}],
    })
}

/// The answer ids a vote event's `content` names, if it is a vote on `poll`.
pub fn vote_of(event_type: &str, content: &Value, poll: &str) -> Option<Vec<String>> {
    if ![RESPONSE, RESPONSE_STABLE].contains(&event_type) {
        return None;
    }
    let relates = content.get("m.relates_to")?;
    if relates.get("event_id").and_then(Value::as_str) != Some(poll) {
        return None;
    }
    let ids = content
        .pointer(&format!("/{RESPONSE}/answers"))
        .or_else(|| content.get("m.selections"))
        .and_then(Value::as_array)?;
    Some(ids.iter().filter_map(Value::as_str).map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_start_carries_both_forms_and_a_text_fallback() {
        let c = start_content("Lunch?", &["Pizza".into(), "Sushi".into()], false);
        assert_eq!(c[START]["answers"][1], json!({"id": "2", TEXT: "Sushi"}));
        assert_eq!(c[START]["kind"], "org.matrix.msc3381.poll.undisclosed");
        assert_eq!(c["m.poll"]["answers"][0], json!({"m.id": "1", "m.text": [{"body": "Pizza"}]}));
        assert_eq!(c[TEXT], "Lunch?\n1. Pizza\n2. Sushi");
        assert_eq!(c["m.text"][0]["body"], c[TEXT]);
    }

    #[test]
    fn a_reply_names_an_answer_by_its_number_or_in_a_reply_its_words() {
        let answers = ["Pizza".to_owned(), "Sushi bar".to_owned()];
        for (text, by_name, want) in [
            ("2", false, Some(1)),
            (" #1 ", false, Some(0)),
            ("2.", false, Some(1)),
            ("1)", false, Some(0)),
            ("3", true, None),
            ("0", true, None),
            ("-1", true, None),
            ("sushi  BAR!", true, Some(1)),
            ("sushi bar", false, None),
            ("2 please", true, None),
            ("", true, None),
        ] {
            assert_eq!(chosen(text, &answers, by_name), want, "{text:?} by_name={by_name}");
        }
    }

    #[test]
    fn a_vote_counts_only_for_the_poll_it_refers_to() {
        let vote = json!({"m.relates_to": {"rel_type": "m.reference", "event_id": "$p"}, RESPONSE: {"answers": ["2"]}});
        assert_eq!(vote_of(RESPONSE, &vote, "$p"), Some(vec!["2".to_owned()]));
        assert_eq!(vote_of(RESPONSE, &vote, "$other"), None);
        assert_eq!(vote_of("m.room.message", &vote, "$p"), None);
        let stable = json!({"m.relates_to": {"rel_type": "m.reference", "event_id": "$p"}, "m.selections": ["1"]});
        assert_eq!(vote_of(RESPONSE_STABLE, &stable, "$p"), Some(vec!["1".to_owned()]));
    }
}
