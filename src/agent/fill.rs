//! Asking a model for a call's arguments as structured output. A small model asked
//! "Remind me in 2 minutes to stretch" often answers "Reminder: stretch in 2 minutes."
//! and calls nothing, and told so, says it again (Qwen2.5-Coder-1.5B, every time in the
//! benchmark). Asked instead for just the arguments, with its output held to their JSON
//! schema (`response_format: json_schema`, which llama.cpp turns into a grammar and
//! OpenAI-compatible APIs honour), the same model fills them in (6 answers of 6 measured
//! here). The caller decides when to ask ([`Fill`]) and runs what comes back as a call,
//! through the same checks as any other.
//!
//! An endpoint that refuses structured output (a 400 or 422) is not asked again: the
//! caller falls back to telling the model in words.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::llm::Llm;
use super::{Error, Message, Reply, wire};

/// Most tokens a filled-in call may take: arguments, not an answer.
const FILL_TOKENS: u32 = 400;

/// What to ask for: the arguments of `tool`, held to `schema`, after `ask` (told to the
/// model as the member's turn, after the conversation so far).
#[derive(Debug, Clone, PartialEq)]
pub struct Fill {
    pub tool: String,
    pub schema: Value,
    pub ask: String,
}

/// The request body for `fill` after `messages`: no tools, the output held to the schema.
pub fn request(model: &str, messages: &[Message], fill: &Fill) -> Value {
    let mut messages = messages.to_vec();
    messages.push(Message::User(fill.ask.clone()));
    let mut body = wire::request(model, FILL_TOKENS, &messages, &[], false);
    if let Some(fields) = body.as_object_mut() {
        // Without tools, `tool_choice` is refused by OpenAI's API.
        fields.remove("tools");
        fields.remove("tool_choice");
    }
    body["response_format"] = json!({
        "type": "json_schema",
        "json_schema": {"name": fill.tool, "schema": fill.schema, "strict": false},
    });
    body
}

impl Llm {
    /// The model's answer to `fill`: its text the arguments (a JSON object), or none when
    /// the model gave no object; or `None`, not asked: calls written as text are not read
    /// here (`llm.text_tool_calls` off), or the endpoint refuses structured output.
    pub(super) async fn fill_in(&self, messages: &[Message], fill: &Fill) -> Result<Option<Reply>, Error> {
        if !self.text_tool_calls || !self.structured.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let _slot = self.calls.acquire().await.map_err(|_| Error::Api("the LLM client is closed".to_owned()))?;
        let messages = super::vision::named(messages);
        match self.whole_request(request(self.model(), &messages, fill)).await {
            Ok(reply) => {
                let object = reply
                    .text
                    .as_deref()
                    .and_then(|t| serde_json::from_str::<Value>(t.trim()).ok())
                    .filter(Value::is_object);
                // Asked and answered (and billed), with or without arguments.
                Ok(Some(Reply { text: object.map(|args| args.to_string()), ..reply }))
            }
            Err(Error::Refused(status @ (400 | 422), why)) => {
                tracing::warn!(status, why, "the LLM endpoint refused structured output; not asking for it again");
                self.structured.store(false, Ordering::Relaxed);
                Ok(None)
            }
            Err(Error::Empty) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_request_asks_for_the_schema_without_tools_after_the_conversation() {
        let fill = Fill {
            tool: "schedule".into(),
            schema: json!({"type": "object", "required": ["at"]}),
            ask: "The arguments, please.".into(),
        };
        let body = request("m", &[Message::User("@a:x: Remind me in 2 minutes".into())], &fill);
        assert_eq!(body["response_format"]["json_schema"]["schema"], fill.schema);
        assert_eq!(body["response_format"]["json_schema"]["name"], "schedule");
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "{body}");
        assert_eq!(body["stream"], false);
        let sent = body["messages"].as_array().expect("messages");
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1]["content"], "The arguments, please.");
    }
}
