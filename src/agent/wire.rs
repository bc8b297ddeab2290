//! The OpenAI chat-completions wire format, kept apart from the domain types: building a
//! request body and reading a response leniently (servers that call themselves
//! "OpenAI-compatible" differ in the fields they fill).

use serde_json::{Value, json};

use super::{Message, Reply, ToolCall, ToolSpec, Usage};

/// A call's arguments as the history gives them back: a cut or malformed call's as `{}`.
/// Servers that render the history through a chat template (llama.cpp) parse every
/// call's arguments, and refuse the whole request with a 500 when one is not JSON, so a
/// cut call told to the model would be cut again. What the call was is in its result.
fn readable(arguments: &str) -> &str {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(_)) => arguments,
        _ => "{}",
    }
}

/// The request body; `stream` asks for server-sent events, with the usage in the last one.
pub fn request(model: &str, max_tokens: u32, messages: &[Message], tools: &[ToolSpec], stream: bool) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| match m {
            Message::System(text) => json!({"role": "system", "content": text}),
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::UserImages { text, images } => {
                let mut parts = vec![json!({"type": "text", "text": text})];
                parts.extend(images.iter().map(|url| json!({"type": "image_url", "image_url": {"url": url}})));
                json!({"role": "user", "content": parts})
            }
            Message::Assistant { text, tool_calls } => {
                let mut v = json!({"role": "assistant", "content": text});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": readable(&c.arguments)}}))
                        .collect();
                }
                v
            }
            Message::Tool { call_id, content } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        })
        .collect();
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
        .collect();
    let mut body = json!({"model": model, "messages": messages, "tools": tools, "tool_choice": "auto", "max_tokens": max_tokens, "stream": stream});
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// Reads the first choice. `None` when the response has no usable message.
pub fn reply(response: &Value) -> Option<Reply> {
    let choice = response.get("choices")?.get(0)?;
    let message = choice.get("message")?;
    let length = choice.get("finish_reason").and_then(Value::as_str) == Some("length");
    let text = message.get("content").and_then(Value::as_str).map(str::to_owned).filter(|t| !t.is_empty());
    let tool_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let f = c.get("function")?;
                    let arguments = match f.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    let id = c.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{i}"), str::to_owned);
                    Some(ToolCall::new(id, f.get("name")?.as_str()?, arguments))
                })
                .collect()
        })
        .unwrap_or_default();
    let usage = usage(response).unwrap_or_default();
    let odds = super::odds::of(choice);
    Some(Reply { text, tool_calls, usage, odds, ..Reply::default() }.stopped_at_length(length))
}

/// The usage a response (or a stream's event) reports, if any: `usage` as OpenAI has it,
/// with the cached part of the prompt in `prompt_tokens_details.cached_tokens` (OpenAI,
/// vLLM, recent llama.cpp), or in llama.cpp's own `timings` (`cache_n` reused, `prompt_n`
/// evaluated).
pub fn usage(response: &Value) -> Option<Usage> {
    let usage = response.get("usage").filter(|u| u.is_object());
    let timings = response.get("timings").filter(|t| t.is_object());
    if usage.is_none() && timings.is_none() {
        return None;
    }
    let count = |v: Option<&Value>, k: &str| v.and_then(|u| u.get(k)).and_then(Value::as_u64);
    let details = usage.and_then(|u| u.get("prompt_tokens_details"));
    let cached = count(details, "cached_tokens").or(count(timings, "cache_n")).unwrap_or(0);
    let evaluated = count(timings, "prompt_n").map(|n| n + cached);
    let prompt = count(usage, "prompt_tokens").unwrap_or(0).max(evaluated.unwrap_or(0));
    let completion = count(usage, "completion_tokens").or(count(timings, "predicted_n")).unwrap_or(0);
    Some(Usage { prompt, completion, cached: cached.min(prompt) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_calls_arguments_go_back_as_an_empty_object() {
        let call = |arguments: &str| ToolCall::new("c", "rich_send", arguments);
        let history = [Message::Assistant {
            text: None,
            tool_calls: vec![call(r#"{"fallback": "Par"#), call(""), call("[1]"), call(r#"{"a": 1}"#)],
        }];
        let body = request("m", 10, &history, &[], false);
        let sent: Vec<&str> = body["messages"][0]["tool_calls"]
            .as_array()
            .expect("calls")
            .iter()
            .filter_map(|c| c["function"]["arguments"].as_str())
            .collect();
        assert_eq!(sent, ["{}", "{}", "{}", r#"{"a": 1}"#]);
    }

    #[test]
    fn replies_are_read_leniently() {
        let r = reply(&json!({"choices": [{"finish_reason": "eos", "message": {"content": null, "tool_calls": [
            {"id": "c1", "function": {"name": "rich_send", "arguments": "{\"a\":1}"}},
            {"function": {"name": "rich_edit", "arguments": {"b": 2}}}
        ]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}))
        .expect("a reply");
        assert_eq!(r.text, None);
        assert_eq!(r.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(r.tool_calls[1].id, "call_1");
        assert_eq!(r.tool_calls[1].arguments, "{\"b\":2}");
        assert_eq!(r.usage, Usage { prompt: 10, completion: 3, cached: 0 });
        assert_eq!(reply(&json!({"error": "x"})), None);
    }

    #[test]
    fn cached_prompt_tokens_are_read_where_each_server_reports_them() {
        let openai = json!({"usage": {"prompt_tokens": 2006, "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 1920}}});
        assert_eq!(usage(&openai), Some(Usage { prompt: 2006, completion: 300, cached: 1920 }));
        // llama.cpp: both, as measured from its server here.
        let llama = json!({"usage": {"completion_tokens": 8, "prompt_tokens": 39, "prompt_tokens_details": {"cached_tokens": 34}},
            "timings": {"cache_n": 34, "prompt_n": 5, "predicted_n": 8}});
        assert_eq!(usage(&llama), Some(Usage { prompt: 39, completion: 8, cached: 34 }));
        // A llama.cpp that reports timings only, or counts only what it evaluated.
        let timings =
            json!({"usage": {"prompt_tokens": 5, "completion_tokens": 8}, "timings": {"cache_n": 34, "prompt_n": 5}});
        assert_eq!(usage(&timings), Some(Usage { prompt: 39, completion: 8, cached: 34 }));
        assert_eq!(
            usage(&json!({"timings": {"cache_n": 2, "prompt_n": 3, "predicted_n": 1}})),
            Some(Usage { prompt: 5, completion: 1, cached: 2 })
        );
        assert_eq!(usage(&json!({"usage": null})), None);
        // Nonsense is bounded: never more cached than the prompt.
        let odd = json!({"usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 9}}});
        assert_eq!(usage(&odd).map(|u| u.fresh()), Some(0));
    }
}
