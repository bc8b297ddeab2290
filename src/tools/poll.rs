//! `rich_poll` and `rich_poll_end`: what the model is told of them, and the pure check of
//! their arguments. A poll goes to the chat the turn is in (its votes are that room's);
//! whether the poll to end is the persona's, and of this room, is the turn's to decide.

use ruma::{EventId, OwnedEventId};
use serde_json::{Map, Value, json};

use super::{ToolError, ToolErrorCode};
use crate::agent::ToolSpec;
use crate::blocks::cut;

pub const RICH_POLL: &str = "rich_poll";
pub const RICH_POLL_END: &str = "rich_poll_end";

/// Characters of a question at most.
pub const MAX_QUESTION: usize = 300;
/// Characters of an answer at most.
pub const MAX_ANSWER: usize = 100;
/// Answers a poll has: at least, at most.
pub const ANSWERS: std::ops::RangeInclusive<usize> = 2..=20;
/// `end_after_secs`: at least a minute, at most 30 days.
pub const END_AFTER: std::ops::RangeInclusive<u64> = 60..=30 * 24 * 3600;

/// A checked poll call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollCall {
    Start { question: String, answers: Vec<String>, disclosed: bool, end_after_secs: Option<u64> },
    End { poll: OwnedEventId },
}

/// The two poll tools.
pub fn poll_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: RICH_POLL.to_owned(),
            description: format!(
                "Start a poll in this chat; votes and tally are handled for you. It ends after end_after_secs \
                 or at {RICH_POLL_END}. Returns its event_id."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "answers": {"type": "array", "items": {"type": "string"}, "description": format!("{}-{} answers.", ANSWERS.start(), ANSWERS.end())},
                    "kind": {"type": "string", "enum": ["disclosed", "undisclosed"]},
                    "end_after_secs": {"type": "integer"},
                },
                "required": ["question", "answers"],
                "additionalProperties": false,
            }),
        },
        ToolSpec {
            name: RICH_POLL_END.to_owned(),
            description: "End your poll; returns its result to tell.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "poll": {"type": "string"},
                },
                "required": ["poll"],
                "additionalProperties": false,
            }),
        },
    ]
}

use ToolErrorCode::InvalidArguments;

/// Checks a poll tool's call.
pub fn plan_poll(name: &str, args: &Value) -> Result<PollCall, ToolError> {
    let empty = Map::new();
    let args = match args {
        Value::Object(map) => map,
        Value::Null => &empty,
        _ => return Err(ToolError::new(InvalidArguments, "arguments must be a JSON object")),
    };
    let allowed: &[&str] =
        if name == RICH_POLL { &["question", "answers", "kind", "end_after_secs"] } else { &["poll"] };
    if let Some(unknown) = args.keys().find(|k| !allowed.contains(&k.as_str())) {
        let unknown = cut(unknown, 40);
        return Err(ToolError::at(
            InvalidArguments,
            unknown.clone(),
            format!("unknown argument \"{unknown}\" (allowed: {})", allowed.join(", ")),
        ));
    }
    if name == RICH_POLL_END {
        let bad = || ToolError::at(InvalidArguments, "poll", "poll must be the event id of a poll you started");
        let id = args.get("poll").and_then(Value::as_str).map(str::trim).ok_or_else(bad)?;
        return Ok(PollCall::End { poll: EventId::parse(id).map_err(|_| bad())? });
    }
    let question = text(args.get("question"), "question", MAX_QUESTION)?;
    let Some(Value::Array(items)) = args.get("answers") else {
        return Err(ToolError::at(InvalidArguments, "answers", "answers must be an array of strings"));
    };
    if !ANSWERS.contains(&items.len()) {
        let (min, max) = (ANSWERS.start(), ANSWERS.end());
        return Err(ToolError::at(
            InvalidArguments,
            "answers",
            format!("{} answers; a poll has {min}-{max}", items.len()),
        ));
    }
    let mut answers: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let answer = text(Some(item), &format!("answers[{i}]"), MAX_ANSWER)?;
        if answers.iter().any(|a| a.eq_ignore_ascii_case(&answer)) {
            return Err(ToolError::at(InvalidArguments, format!("answers[{i}]"), "answers must be distinct"));
        }
        answers.push(answer);
    }
    let disclosed = match args.get("kind").and_then(|k| if k.is_null() { None } else { Some(k.as_str()) }) {
        None | Some(Some("disclosed")) => true,
        Some(Some("undisclosed")) => false,
        Some(_) => {
            return Err(ToolError::at(InvalidArguments, "kind", "kind must be \"disclosed\" or \"undisclosed\""));
        }
    };
    let end_after_secs = match args.get("end_after_secs") {
        None | Some(Value::Null) => None,
        Some(v) => {
            match super::args::integer(v).and_then(|s| u64::try_from(s).ok()).filter(|s| END_AFTER.contains(s)) {
                Some(s) => Some(s),
                None => {
                    let (min, max) = (END_AFTER.start(), END_AFTER.end());
                    return Err(ToolError::at(
                        InvalidArguments,
                        "end_after_secs",
                        format!("end_after_secs must be a whole number of seconds, {min}-{max}"),
                    ));
                }
            }
        }
    };
    Ok(PollCall::Start { question, answers, disclosed, end_after_secs })
}

/// A trimmed, non-empty, one-line string of at most `max` characters.
fn text(value: Option<&Value>, path: &str, max: usize) -> Result<String, ToolError> {
    let s = value.and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if s.is_empty() || s.chars().count() > max || s.contains(['\n', '\r']) {
        return Err(ToolError::at(InvalidArguments, path, format!("{path} must be one line of 1-{max} characters")));
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_path(r: Result<PollCall, ToolError>) -> (String, String) {
        let e = r.expect_err("refused");
        (e.code.to_string(), e.path.unwrap_or_default())
    }

    #[test]
    fn a_poll_is_checked_argument_by_argument() {
        let ok = plan_poll(
            RICH_POLL,
            &json!({"question": " Lunch? ", "answers": ["Pizza", "Sushi"], "end_after_secs": 600}),
        );
        assert_eq!(
            ok.expect("ok"),
            PollCall::Start {
                question: "Lunch?".into(),
                answers: vec!["Pizza".into(), "Sushi".into()],
                disclosed: true,
                end_after_secs: Some(600)
            }
        );
        let undisclosed = plan_poll(RICH_POLL, &json!({"question": "Q", "answers": ["a", "b"], "kind": "undisclosed"}));
        assert!(matches!(undisclosed, Ok(PollCall::Start { disclosed: false, end_after_secs: None, .. })));
        for (args, path) in [
            (json!({"question": "Q", "answers": ["a"]}), "answers"),
            (json!({"question": "Q", "answers": vec!["x"; 21]}), "answers"),
            (json!({"question": "Q", "answers": ["a", "A"]}), "answers[1]"),
            (json!({"question": "", "answers": ["a", "b"]}), "question"),
            (json!({"question": "Q", "answers": ["a", 2]}), "answers[1]"),
            (json!({"question": "Q", "answers": ["a", "b"], "kind": "secret"}), "kind"),
            (json!({"question": "Q", "answers": ["a", "b"], "end_after_secs": 5}), "end_after_secs"),
            (json!({"question": "Q", "answers": ["a", "b"], "room": "!x"}), "room"),
        ] {
            assert_eq!(code_path(plan_poll(RICH_POLL, &args)), ("invalid_arguments".into(), path.into()), "{args}");
        }
    }

    #[test]
    fn a_polls_length_may_come_quoted_as_models_write_it() {
        let args = json!({"question": "Q", "answers": ["a", "b"], "end_after_secs": "600"});
        assert!(matches!(plan_poll(RICH_POLL, &args), Ok(PollCall::Start { end_after_secs: Some(600), .. })));
        let args = json!({"question": "Q", "answers": ["a", "b"], "end_after_secs": "ten minutes"});
        assert_eq!(code_path(plan_poll(RICH_POLL, &args)).1, "end_after_secs");
    }

    #[test]
    fn ending_names_a_poll_by_event_id() {
        assert_eq!(
            plan_poll(RICH_POLL_END, &json!({"poll": "$abc"})).expect("ok"),
            PollCall::End { poll: EventId::parse("$abc").expect("id") }
        );
        assert_eq!(code_path(plan_poll(RICH_POLL_END, &json!({"poll": "abc"}))).1, "poll");
    }
}
