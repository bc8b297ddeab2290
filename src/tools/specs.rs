//! What the model is offered: the two tools' names, descriptions and JSON Schemas, and the
//! system-prompt line that says when to use them. The block list in the description is
//! generated from the catalogue, so it never drifts from what `plan` accepts.
//!
//! The specs are the same bytes in every room and for every asker: what the `room`
//! argument may name there ([`RoomChoices`]) is told in the turn's note instead, so a model
//! server reuses the tools it evaluated for one room in the next. And they are short: a
//! small model on a CPU reads them before every first question.

use ruma::OwnedRoomId;
use serde_json::{Value, json};

use super::{MAX_FALLBACK, RICH_EDIT, RICH_SEND};
use crate::agent::ToolSpec;
use crate::blocks::CATALOGUE;

/// What the `room` argument may name in the current context (told in the turn's note).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomChoices {
    /// Whether the current chat is already the asker's DM (then `dm` means this chat).
    pub in_dm: bool,
    /// Other rooms both the asker and the persona are joined to: (room id, name). Names
    /// are members' words: the description quotes them as JSON strings, as data.
    pub shared: Vec<(OwnedRoomId, String)>,
}

/// A complete, valid `rich_send` call, shown to the model in the description (and tested
/// to pass `plan`). Its data is plainly an example: a model that copies it tells no one a
/// plausible fact (a weather example was passed off as Lisbon's weather).
pub const EXAMPLE_CALL: &str = r#"{"payload": {"v": 1, "blocks": [{"type": "table", "columns": ["A", "B"], "rows": [["x", "2.5"]]}]}, "fallback": "x: 2.5"}"#;

/// The system-prompt line for the tools.
pub fn prompt_line() -> &'static str {
    "Use rich_send when blocks help more than prose; short answers can be plain text. Call tools; never write a \
     call as text. Never claim you did something (sent, reminded, polled) unless its tool succeeded this turn."
}

/// The tool specs; `edit_interval_ms` is the configured pace of writes to one message,
/// which the `rich_edit` description states.
pub fn tool_specs(edit_interval_ms: u64) -> Vec<ToolSpec> {
    let room = room_schema();
    // The payload's shape is the description's example (1-8 blocks, as `plan` says).
    let payload = json!({"type": ["object", "string"]});
    // In the subset every common server's grammar converter takes (`agent::portable`):
    // no length bound past a few hundred (the fallback's is in its description, and
    // `plan` holds it), no `\S` in patterns.
    let fallback =
        json!({"type": "string", "description": format!("Markdown, all the blocks say (≤{MAX_FALLBACK} chars).")});
    // Event ids are plain strings here: `plan` checks them and says what is wrong, and a
    // pattern costs every prompt a few dozen tokens.
    let event_id = json!({"type": "string"});
    vec![
        ToolSpec {
            name: RICH_SEND.to_owned(),
            description: send_description(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "payload": payload,
                    "fallback": fallback,
                    "reply_to": event_id,
                    "thread": event_id,
                    "room": room,
                },
                "required": ["payload", "fallback"],
                "additionalProperties": false,
            }),
        },
        ToolSpec {
            name: RICH_EDIT.to_owned(),
            description: edit_description(edit_interval_ms),
            parameters: json!({
                "type": "object",
                "properties": {
                    "event_id": event_id,
                    "payload": payload,
                    "fallback": {"type": "string"},
                },
                "required": ["event_id", "payload", "fallback"],
                "additionalProperties": false,
            }),
        },
    ]
}

fn edit_description(interval_ms: u64) -> String {
    format!(
        "Replace your rich message event_id with a new payload and fallback, as in rich_send (edits are {} s \
         apart).",
        seconds(interval_ms)
    )
}

/// `2500` -> `2.5`, `3000` -> `3`.
fn seconds(ms: u64) -> String {
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn send_description() -> String {
    let blocks: Vec<String> = CATALOGUE
        .iter()
        .map(|spec| {
            let required: Vec<&str> = spec.fields.iter().filter(|f| f.required).map(|f| f.name).collect();
            format!("{}({})", spec.name, required.join(","))
        })
        .collect();
    format!(
        "Post a rich message: blocks and a Markdown fallback that says it all alone. Blocks (required fields): {}. \
         Numbers: integers or decimal strings. Times: ISO 8601. Example: {EXAMPLE_CALL}\nReturns event_id or an error to fix. When the message said it all, end your \
         turn with exactly [no reply].",
        blocks.join(", ")
    )
}

/// The `room` argument, the same in every room: which rooms it may name is the note's.
fn room_schema() -> Value {
    json!({"type": "string", "description": "Omit for this chat; or \"dm\", or a room id from the note."})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_in_the_subset_every_common_model_server_takes() {
        for spec in tool_specs(2500) {
            let problems = crate::agent::portable::problems(&spec.parameters);
            assert!(problems.is_empty(), "{}: {problems:?}", spec.name);
        }
    }

    #[test]
    fn the_edit_description_states_the_configured_pace() {
        for (ms, said) in [(2500, "2.5 s apart"), (3000, "3 s apart"), (250, "0.25 s apart")] {
            let specs = tool_specs(ms);
            let edit = specs.iter().find(|s| s.name == RICH_EDIT).expect("rich_edit");
            assert!(edit.description.contains(said), "{ms}: {}", edit.description);
        }
    }
}
