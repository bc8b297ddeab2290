//! A streamed chat completion, read as it arrives: content deltas are appended to the
//! live text the turn shows (and edits in place at its pace), tool-call deltas are
//! gathered by their index (a call's id and name come first, its arguments in pieces),
//! and the usage comes in the last event when the server reports it.

use futures::StreamExt;
use serde_json::Value;

use super::{Error, LiveText, Reply, ToolCall, Usage};

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Reads `events` to the end into one reply, feeding `live` with the text so far.
pub async fn read<S, E>(mut events: S, live: &LiveText) -> Result<Reply, Error>
where
    S: futures::Stream<Item = Result<Value, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut text = String::new();
    let mut calls: Vec<PartialCall> = Vec::new();
    let mut usage = Usage::default();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| Error::Cut(text.clone(), e.to_string()))?;
        if let Some(u) = event.get("usage").filter(|u| u.is_object()) {
            let count = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
            usage = Usage { prompt: count("prompt_tokens"), completion: count("completion_tokens") };
        }
        let Some(delta) = event.get("choices").and_then(|c| c.get(0)).and_then(|c| c.get("delta")) else { continue };
        if let Some(piece) = delta.get("content").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            text.push_str(piece);
            live.send_replace(text.clone());
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            if index > 64 {
                continue;
            }
            while calls.len() <= index {
                calls.push(PartialCall::default());
            }
            let slot = &mut calls[index];
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                slot.id = Some(id.to_owned());
            }
            if let Some(f) = call.get("function") {
                if let Some(name) = f.get("name").and_then(Value::as_str) {
                    slot.name.push_str(name);
                }
                if let Some(args) = f.get("arguments").and_then(Value::as_str) {
                    slot.arguments.push_str(args);
                }
            }
        }
    }
    let tool_calls = calls
        .into_iter()
        .enumerate()
        .filter(|(_, c)| !c.name.is_empty())
        .map(|(i, c)| ToolCall {
            id: c.id.unwrap_or_else(|| format!("call_{i}")),
            name: c.name,
            arguments: c.arguments,
        })
        .collect();
    Ok(Reply { text: Some(text).filter(|t| !t.is_empty()), tool_calls, usage })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn deltas_become_one_reply_and_the_text_grows_live() {
        let events: Vec<Result<Value, String>> = vec![
            Ok(json!({"choices": [{"delta": {"role": "assistant", "content": "Hel"}}]})),
            Ok(json!({"choices": [{"delta": {"content": "lo"}}]})),
            Ok(
                json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "rich_send", "arguments": "{\"a\""}}]}}]}),
            ),
            Ok(json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]})),
            Ok(json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})),
        ];
        let (live, watch) = tokio::sync::watch::channel(String::new());
        let reply = read(futures::stream::iter(events), &live).await.expect("a reply");
        assert_eq!(reply.text.as_deref(), Some("Hello"));
        assert_eq!(*watch.borrow(), "Hello");
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall { id: "c1".into(), name: "rich_send".into(), arguments: "{\"a\": 1}".into() }]
        );
        assert_eq!(reply.usage, Usage { prompt: 7, completion: 3 });

        let cut: Vec<Result<Value, String>> =
            vec![Ok(json!({"choices": [{"delta": {"content": "Half an"}}]})), Err("connection reset".into())];
        match read(futures::stream::iter(cut), &live).await {
            Err(Error::Cut(so_far, why)) => {
                assert_eq!((so_far.as_str(), why.as_str()), ("Half an", "connection reset"))
            }
            other => panic!("expected a cut stream, got {other:?}"),
        }
    }
}
