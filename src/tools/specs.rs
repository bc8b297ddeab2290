//! What the model is offered: the two tools' names, descriptions and JSON Schemas, and the
//! system-prompt line that says when to use them. The block list in the description is
//! generated from the catalogue, so it never drifts from what `plan` accepts.

use ruma::OwnedRoomId;
use serde_json::{Value, json};

use super::{MAX_FALLBACK, RICH_EDIT, RICH_SEND};
use crate::agent::ToolSpec;
use crate::blocks::CATALOGUE;

/// What the `room` argument may name in the current context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomChoices {
    /// Whether the current chat is already the asker's DM (then `dm` means this chat).
    pub in_dm: bool,
    /// Other rooms both the asker and the persona are joined to: (room id, name). Names
    /// are members' words: the description quotes them as JSON strings, as data.
    pub shared: Vec<(OwnedRoomId, String)>,
}

/// A complete, valid `rich_send` call, shown to the model in the description (and tested
/// to pass `plan`).
pub const EXAMPLE_CALL: &str = r#"{"payload": {"v": 1, "blocks": [{"type": "weather", "location": "Lisbon", "temp": "21.5", "unit": "C", "condition": "Sunny", "high": 23, "low": "14.5"}]}, "fallback": "**Lisbon**: 21.5 °C, sunny (high 23, low 14.5)"}"#;

/// An event id, as the tools' schemas let the model write one (`$` and 1 to 254 visible
/// ASCII characters; `plan` checks the exact rules).
pub const EVENT_ID_PATTERN: &str = r"^\$[!-~]{1,254}$";

/// The system-prompt line for the tools.
pub fn prompt_line() -> &'static str {
    "Answer with a rich message (rich_send; rich_edit updates one you sent) whenever blocks help more than \
     prose; short answers can stay plain text. A rich message's fallback must say everything on its own. \
     When a rich message already said it all, end your turn with exactly [no reply]."
}

/// The tool specs for the current context; `edit_interval_ms` is the configured pace of
/// writes to one message, which the `rich_edit` description states.
pub fn tool_specs(rooms: &RoomChoices, edit_interval_ms: u64) -> Vec<ToolSpec> {
    let room = room_schema(rooms);
    let payload = json!({
        "description": "{\"v\": 1, \"blocks\": [1-8 blocks]}",
        "type": ["object", "string"],
    });
    // In the subset every common server's grammar converter takes (`agent::portable`):
    // no length bound past a few hundred (the fallback's is in its description, and
    // `plan` holds it), no `\S` in patterns.
    let fallback = json!({
        "type": "string",
        "description": format!("CommonMark text with every fact the blocks show (at most {MAX_FALLBACK} characters)."),
    });
    let event_id = |what: &str| json!({"type": "string", "pattern": EVENT_ID_PATTERN, "description": what});
    vec![
        ToolSpec {
            name: RICH_SEND.to_owned(),
            description: send_description(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "payload": payload,
                    "fallback": fallback,
                    "reply_to": event_id("Reply to this event id."),
                    "thread": event_id("Post in the thread rooted at this event id."),
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
                    "event_id": event_id("The event id of your original message."),
                    "payload": payload,
                    "fallback": fallback,
                    "room": room,
                },
                "required": ["event_id", "payload", "fallback"],
                "additionalProperties": false,
            }),
        },
    ]
}

fn edit_description(interval_ms: u64) -> String {
    format!(
        "Replace a rich message you sent (the event_id rich_send returned) with a full new payload and \
         fallback. Edits of one message are paced {} s apart; a faster one waits.",
        seconds(interval_ms)
    )
}

/// `2500` -> `2.5`, `3000` -> `3`.
fn seconds(ms: u64) -> String {
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn send_description() -> String {
    let mut blocks = String::new();
    for spec in CATALOGUE {
        let required: Vec<&str> = spec.fields.iter().filter(|f| f.required).map(|f| f.name).collect();
        blocks.push_str(&format!("\n- {} ({})", spec.name, required.join(", ")));
        if !spec.use_for.is_empty() {
            blocks.push_str(&format!(": {}", spec.use_for));
        }
    }
    format!(
        "Post a rich message: blocks plus a CommonMark fallback. Blocks (required fields):{blocks}\n\
         Button: {{\"label\": \"Yes\", \"action\": {{\"type\": \"react\", \"key\": \"✅\"}}}} or \
         {{\"type\": \"send\", \"body\": \"...\"}}.\n\
         Numbers: integers, or decimal strings (\"62.99\", never 62.99). Times: ISO 8601 (\"2026-12-01T18:00:00Z\"). \
         Images, files: mxc:// URLs you were given, or a data: URL (\"data:text/csv;base64,...\") of a file you made.\n\
         Example call: {EXAMPLE_CALL}\n\
         Returns {{\"event_id\": \"$...\"}}, or {{\"error\", \"code\", \"path\"}} saying what to fix."
    )
}

fn room_schema(rooms: &RoomChoices) -> Value {
    let mut description = String::from("Where to post. Leave it out for this chat");
    if !rooms.in_dm {
        description.push_str("; \"dm\" for a direct chat with the person asking");
    }
    let mut choices: Vec<Value> = vec![json!("dm")];
    if !rooms.shared.is_empty() {
        description.push_str("; or one of these rooms you share with them:");
        for (id, name) in &rooms.shared {
            let name = serde_json::to_string(name).unwrap_or_default();
            description.push_str(&format!(" {id} (named {name});"));
            choices.push(json!(id.as_str()));
        }
    }
    description.push('.');
    json!({"type": "string", "enum": choices, "description": description})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_in_the_subset_every_common_model_server_takes() {
        let shared = vec![(ruma::owned_room_id!("!a:x"), "Team \"ops\" [\\d+]".to_owned())];
        for rooms in [RoomChoices::default(), RoomChoices { in_dm: true, shared }] {
            for spec in tool_specs(&rooms, 2500) {
                let problems = crate::agent::portable::problems(&spec.parameters);
                assert!(problems.is_empty(), "{}: {problems:?}", spec.name);
            }
        }
    }

    #[test]
    fn the_edit_description_states_the_configured_pace() {
        for (ms, said) in [(2500, "paced 2.5 s apart"), (3000, "paced 3 s apart"), (250, "paced 0.25 s apart")] {
            let specs = tool_specs(&RoomChoices::default(), ms);
            let edit = specs.iter().find(|s| s.name == RICH_EDIT).expect("rich_edit");
            assert!(edit.description.contains(said), "{ms}: {}", edit.description);
        }
    }
}
