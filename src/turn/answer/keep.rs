//! Keeping a promise the model made without its tool. A member asks "Remind me in 2
//! minutes to stretch"; a small model answers "Reminder: Stretch in 2 minutes." and calls
//! nothing, and told so in words, says it again (Qwen2.5-Coder-1.5B: every time in the
//! benchmark). So when the member asked for what only a tool does (`promises`) and the
//! answer did not call it, richbot asks the model once a turn for just that call's
//! arguments, its output held to their schema (`agent::Fill`), and makes the call: the
//! same checks as any call, its result back to the model, which then answers. The
//! answer that promised is not shown (the call's result decides what is true).
//!
//! Only for tools whose arguments a model can fill in from the member's words: a
//! reminder (`schedule`) and a poll (`rich_poll`); and only when the member asked for one
//! (whatever the answer says: a promise, a question back, or a decline of what its own
//! tool does). A claim the member did not ask for is not acted on; `review` sends it back
//! as before. A model that cannot be asked so, or gives nothing, leaves the answer to
//! `review`. What it fills in still goes through the tool's checks: a reminder past the
//! horizon is refused there, and the model told why.

use serde_json::{Value, json};

use super::promises;
use crate::agent::{Fill, Message, Reply, ToolCall, ToolSpec};
use crate::strings;
use crate::tools::POLL_ANSWERS as ANSWERS;

/// The prefix of a filled-in call's id: `filled_<round>`.
pub const ID_PREFIX: &str = "filled_";

/// What to ask for when `reply` (without calls) answers a member who asked for what only
/// a tool does and no call of it succeeded in this turn (`messages`), whatever the answer
/// says (it promises, asks back, or declines what its tool does): that tool's arguments.
pub fn fill_for(reply: &Reply, messages: &[Message], tools: &[ToolSpec]) -> Option<Fill> {
    if !reply.tool_calls.is_empty() || reply.unreadable_text {
        return None;
    }
    let tool = promises::requested(super::review::asked(messages), messages, tools)?;
    let (schema, fields) = fillable(tool)?;
    Some(Fill { tool: tool.to_owned(), schema, ask: strings::fill_call(tool, fields) })
}

/// The schema a call of `tool` is filled in to, and its fields as the model is told them
/// (a schema only holds the output; the model does not read it).
fn fillable(tool: &str) -> Option<(Value, &'static str)> {
    let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    match tool {
        crate::tools::SCHEDULE => Some((
            object(json!({"at": {"type": "string"}, "message": {"type": "string"}}), &["at", "message"]),
            "`at` (when: the delay as the member said it, such as \"in 2 minutes\", or a local time such as \
             2026-12-24T09:00) and `message` (what to tell them then)",
        )),
        crate::tools::RICH_POLL => Some((
            object(
                json!({
                    "question": {"type": "string"},
                    "answers": {"type": "array", "items": {"type": "string"}, "minItems": ANSWERS.start(), "maxItems": ANSWERS.end()},
                }),
                &["question", "answers"],
            ),
            "`question` and `answers` (the choices)",
        )),
        _ => None,
    }
}

/// `reply` made the call `fill` asked for, with `arguments` (a JSON object): its text
/// (the promise) is not shown; `filled` has the asking call's usage added.
pub fn keep(mut reply: Reply, round: u32, fill: &Fill, filled: &Reply) -> Reply {
    let Some(arguments) = filled.text.clone() else {
        reply.usage.add(filled.usage);
        return reply;
    };
    reply.usage.add(filled.usage);
    reply.text = None;
    reply.tool_calls = vec![ToolCall::new(format!("{ID_PREFIX}{round}"), fill.tool.clone(), arguments)];
    reply.filled = true;
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Usage;

    fn tools() -> Vec<ToolSpec> {
        [crate::tools::SCHEDULE, crate::tools::RICH_POLL, crate::tools::RICH_SEND]
            .map(|name| ToolSpec { name: name.into(), description: String::new(), parameters: json!({}) })
            .to_vec()
    }

    fn answer(text: &str) -> Reply {
        Reply { text: Some(text.into()), ..Reply::default() }
    }

    #[test]
    fn a_reminder_or_poll_the_member_asked_for_and_no_tool_made_is_filled_in() {
        let asked = [Message::User("@alice:x: Remind me in 2 minutes to stretch".into())];
        let fill = fill_for(&answer("Reminder: Stretch in 2 minutes."), &asked, &tools()).expect("a fill");
        assert_eq!(fill.tool, "schedule");
        assert_eq!(fill.schema["required"], json!(["at", "message"]));
        assert!(fill.ask.contains("in 2 minutes") && fill.ask.contains("schedule"), "{}", fill.ask);
        // Whatever it said instead: a question back, chit-chat.
        assert!(fill_for(&answer("What should I remind you of?"), &asked, &tools()).is_some());
        let poll = [Message::User("@alice:x: Make a poll: pizza or sushi?".into())];
        let fill = fill_for(&answer("Poll created!"), &poll, &tools()).expect("a poll fill");
        assert_eq!(fill.schema["properties"]["answers"]["minItems"], 2);
    }

    #[test]
    fn nothing_is_filled_in_unless_the_member_asked_and_nothing_did_it() {
        let asked = [Message::User("@alice:x: Remind me in 2 minutes to stretch".into())];
        // It declines what its tool does (Qwen, after two failed calls): filled in too.
        assert!(fill_for(&answer("I'm sorry, but I can't assist with that."), &asked, &tools()).is_some());
        // It called (natively or written): the call is run.
        let calling = Reply { tool_calls: vec![ToolCall::new("c", "schedule", "{}")], ..answer("Done") };
        assert_eq!(fill_for(&calling, &asked, &tools()), None);
        // A claim nobody asked for goes back in words (`review`), never acted on.
        let chat = [Message::User("@alice:x: How are you?".into())];
        assert_eq!(fill_for(&answer("I've set a reminder for you."), &chat, &tools()), None);
        // Done earlier in this turn.
        let done = [
            asked[0].clone(),
            Message::Assistant { text: None, tool_calls: vec![ToolCall::new("c", "schedule", "{}")] },
            Message::Tool { call_id: "c".into(), content: json!({"id": 3}).to_string() },
        ];
        assert_eq!(fill_for(&answer("Reminder set!"), &done, &tools()), None);
        // Not offered (scheduling is off).
        let only_send = &tools()[2..];
        assert_eq!(fill_for(&answer("Reminder set!"), &asked, only_send), None);
        // A message sent is not filled in: its arguments are the whole answer.
        let send = [Message::User("@alice:x: Tell Bob hi".into())];
        assert_eq!(fill_for(&answer("I've sent it."), &send, &tools()), None);
    }

    #[test]
    fn a_kept_promise_is_the_call_and_not_its_words() {
        let fill = Fill { tool: "schedule".into(), schema: json!({}), ask: String::new() };
        let usage = Usage { prompt: 100, completion: 10, cached: 0 };
        let promised = Reply { usage, ..answer("Reminder: Stretch in 2 minutes.") };
        let filled = Reply { usage, ..answer(r#"{"at":"in 2 minutes","message":"Stretch!"}"#) };
        let kept = keep(promised.clone(), 3, &fill, &filled);
        assert_eq!(kept.text, None);
        assert!(kept.filled);
        assert_eq!(
            kept.tool_calls,
            [ToolCall::new("filled_3", "schedule", r#"{"at":"in 2 minutes","message":"Stretch!"}"#)]
        );
        assert_eq!(kept.usage.prompt, 200);
        // Nothing filled in: the answer stands (for `review`), its cost counted.
        let none = keep(promised.clone(), 3, &fill, &Reply { usage, ..Reply::default() });
        assert_eq!((none.text, none.tool_calls.len(), none.usage.prompt), (promised.text, 0, 200));
    }
}
