//! A streamed chat completion, read as it arrives: content deltas are appended to the
//! live text the turn shows (and edits in place at its pace), tool-call deltas are
//! gathered by their index (a call's id and name come first, its arguments in pieces),
//! and the usage comes in the last event when the server reports it.
//!
//! A stream is complete only when a choice said why it finished (`finish_reason`): one
//! that ends without it (the connection closed early; `[DONE]` alone is not told apart
//! from a close by the client library) is cut, as is one silent for longer than its
//! [`Pace`] allows. A cut stream is an [`Error::Cut`] with the text so far. An error
//! event (`{"error": ...}`) ends it: as [`Error::Unreadable`] when the server could not
//! read the model's tool call, else as cut.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::alive::Alive;
use super::{Error, LiveText, Odds, Reply, ToolCall, Usage};

/// How long a stream may be silent: before its first event, and between two events.
/// Silent means no bytes at all: a ping (an SSE comment) breaks a silence, though it is no
/// event ([`Alive`]).
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub first: Duration,
    pub idle: Duration,
}

/// What of the text so far is fed to the live view: all of it, or (`Some`: calls written
/// as text are read as calls) only what comes before a call may start, so no member sees
/// a call being typed (`written::shown_until`).
pub type Hide<'a> = Option<&'a [super::ToolSpec]>;

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Reads `events` to the end into one reply, feeding `live` with the text so far.
pub async fn read<S, E>(
    mut events: S,
    live: &LiveText,
    pace: Pace,
    alive: &Alive,
    hide: Hide<'_>,
) -> Result<Reply, Error>
where
    S: futures::Stream<Item = Result<Value, E>> + Unpin,
    E: std::fmt::Display,
{
    let mut text = String::new();
    let mut calls: Vec<PartialCall> = Vec::new();
    let mut usage = Usage::default();
    let mut odds: Option<Odds> = None;
    let mut finished = false;
    let mut length = false;
    let mut wait = pace.first;
    loop {
        let event = match next(&mut events, alive, wait).await {
            Err(_) if text.is_empty() && calls.is_empty() && wait == pace.first => {
                return Err(Error::TimedOut(format!("no answer within {} s", wait.as_secs())));
            }
            Err(_) => return Err(Error::Cut(text, format!("nothing arrived for {} s", wait.as_secs()))),
            Ok(None) => break,
            Ok(Some(event)) => event.map_err(|e| Error::Cut(text.clone(), e.to_string()))?,
        };
        // An event is a sign of life too (whatever brought it).
        alive.touch();
        wait = pace.idle;
        // An error sent as an event of a stream already answered 200: the server could
        // not read the model's tool call, or something else broke it off.
        if let Some(error) = event.get("error") {
            let message = error.get("message").and_then(Value::as_str).map_or_else(|| error.to_string(), str::to_owned);
            if super::transport::unreadable_call(&message) {
                return Err(Error::Unreadable(message));
            }
            return Err(Error::Cut(text, format!("the endpoint sent an error: {message}")));
        }
        if let Some(u) = super::wire::usage(&event) {
            usage = u;
        }
        let Some(choice) = event.get("choices").and_then(|c| c.get(0)) else { continue };
        let reason = choice.get("finish_reason").and_then(Value::as_str).filter(|r| !r.is_empty());
        finished |= reason.is_some();
        length |= reason == Some("length");
        let mut so_far = odds.unwrap_or_default();
        if so_far.add(choice) {
            odds = Some(so_far);
            if so_far.babble() {
                // Word salad: no more of it is read (the server stops when the client goes).
                return Ok(Reply { text: Some(text).filter(|t| !t.is_empty()), usage, odds, ..Reply::default() });
            }
        }
        let Some(delta) = choice.get("delta") else { continue };
        if let Some(piece) = delta.get("content").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            text.push_str(piece);
            // With odds, nothing shows before there are enough to judge the words by.
            if odds.is_none_or(|o| o.enough()) {
                let shown = hide.map_or(text.len(), |tools| super::written::shown_until(&text, tools));
                live.send_if_modified(|live| {
                    let changed = *live != text[..shown];
                    if changed {
                        text[..shown].clone_into(live);
                    }
                    changed
                });
            }
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
    if !finished {
        return Err(Error::Cut(text, "the stream ended before the answer said it was complete".to_owned()));
    }
    let tool_calls = calls
        .into_iter()
        .enumerate()
        .filter(|(_, c)| !c.name.is_empty())
        .map(|(i, c)| ToolCall::new(c.id.unwrap_or_else(|| format!("call_{i}")), c.name, c.arguments))
        .collect();
    Ok(Reply { text: Some(text).filter(|t| !t.is_empty()), tool_calls, usage, odds, ..Reply::default() }
        .stopped_at_length(length))
}

/// The next event, unless the server sent nothing at all (not even a ping, [`Alive`])
/// for `wait`.
async fn next<S: futures::Stream + Unpin>(
    events: &mut S,
    alive: &Alive,
    wait: Duration,
) -> Result<Option<S::Item>, ()> {
    loop {
        match tokio::time::timeout_at(alive.last() + wait, events.next()).await {
            Ok(event) => return Ok(event),
            // Bytes that were no event (a ping) came meanwhile: the silence starts there.
            Err(_) if alive.last() + wait > tokio::time::Instant::now() => {}
            Err(_) => return Err(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PACE: Pace = Pace { first: Duration::from_secs(60), idle: Duration::from_secs(30) };

    fn piece(content: &str) -> Result<Value, String> {
        Ok(json!({"choices": [{"delta": {"content": content}, "finish_reason": null}]}))
    }

    fn stop() -> Result<Value, String> {
        Ok(json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}))
    }

    #[tokio::test]
    async fn deltas_become_one_reply_and_the_text_grows_live() {
        let events: Vec<Result<Value, String>> = vec![
            Ok(json!({"choices": [{"delta": {"role": "assistant", "content": "Hel"}}]})),
            piece("lo"),
            Ok(
                json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "rich_send", "arguments": "{\"a\""}}]}}]}),
            ),
            Ok(json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}}]})),
            Ok(json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})),
            Ok(json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})),
        ];
        let (live, watch) = tokio::sync::watch::channel(String::new());
        let reply = read(futures::stream::iter(events), &live, PACE, &Alive::new(), None).await.expect("a reply");
        assert_eq!(reply.text.as_deref(), Some("Hello"));
        assert_eq!(*watch.borrow(), "Hello");
        assert_eq!(reply.tool_calls, vec![ToolCall::new("c1", "rich_send", "{\"a\": 1}")]);
        assert_eq!(reply.usage, Usage { prompt: 7, completion: 3, cached: 0 });

        let cut: Vec<Result<Value, String>> = vec![piece("Half an"), Err("connection reset".into())];
        match read(futures::stream::iter(cut), &live, PACE, &Alive::new(), None).await {
            Err(Error::Cut(so_far, why)) => {
                assert_eq!((so_far.as_str(), why.as_str()), ("Half an", "connection reset"))
            }
            other => panic!("expected a cut stream, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_saying_it_finished_is_cut() {
        let (live, _watch) = tokio::sync::watch::channel(String::new());
        let unfinished = vec![piece("It ends"), piece(" here")];
        match read(futures::stream::iter(unfinished), &live, PACE, &Alive::new(), None).await {
            Err(Error::Cut(so_far, why)) => assert_eq!(so_far, "It ends here", "{why}"),
            other => panic!("expected a cut stream, got {other:?}"),
        }
        let finished = vec![piece("It ends"), piece(" here"), stop()];
        let reply = read(futures::stream::iter(finished), &live, PACE, &Alive::new(), None).await.expect("complete");
        assert_eq!(reply.text.as_deref(), Some("It ends here"));
    }

    /// Events of `pieces`, each `every` after the last, then a finish.
    fn paced(pieces: usize, every: Duration) -> impl futures::Stream<Item = Result<Value, String>> + Unpin {
        let items: Vec<Result<Value, String>> = (0..pieces).map(|_| piece("word ")).chain([stop()]).collect();
        Box::pin(futures::stream::iter(items).then(move |e| async move {
            tokio::time::sleep(every).await;
            e
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_stream_that_keeps_coming_is_never_cut_by_the_clock_but_a_stalled_one_is() {
        let (live, _watch) = tokio::sync::watch::channel(String::new());
        // 90 s of answer, a piece a second, with a 60 s timeout and 30 s of allowed silence.
        let started = tokio::time::Instant::now();
        let reply = read(paced(90, Duration::from_secs(1)), &live, PACE, &Alive::new(), None).await.expect("complete");
        assert_eq!(reply.text.map(|t| t.len()), Some(90 * 5));
        assert!(started.elapsed() >= Duration::from_secs(90));
        // Silent for 31 s after it began: cut, with what came.
        let stalled = futures::stream::iter([piece("so far")]).chain(paced(1, Duration::from_secs(31)));
        match read(Box::pin(stalled), &live, PACE, &Alive::new(), None).await {
            Err(Error::Cut(so_far, why)) => assert_eq!(so_far, "so far", "{why}"),
            other => panic!("expected a cut stream, got {other:?}"),
        }
        // Nothing at all within the timeout: timed out, nothing to show.
        match read(paced(1, Duration::from_secs(61)), &live, PACE, &Alive::new(), None).await {
            Err(Error::TimedOut(_)) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_pings_while_it_reads_a_long_prompt_is_waited_for_and_a_silent_one_is_not() {
        let (live, _watch) = tokio::sync::watch::channel(String::new());
        // The first event after 150 s (the 60 s timeout is long past) and the last 150 s
        // later (the 30 s of silence long past), the server pinging every 20 s meanwhile.
        let alive = Alive::new();
        let pinger = alive.clone();
        let pings = tokio::spawn(async move {
            for _ in 0..15 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                pinger.touch();
            }
        });
        let reply = read(paced(1, Duration::from_secs(150)), &live, PACE, &alive, None).await.expect("answered");
        assert_eq!(reply.text.as_deref(), Some("word "));
        pings.await.expect("pings");
        // Pings that stop: silent for the timeout after the last one.
        let alive = Alive::new();
        let pinger = alive.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            pinger.touch();
        });
        let started = tokio::time::Instant::now();
        match read(paced(1, Duration::from_secs(150)), &live, PACE, &alive, None).await {
            Err(Error::TimedOut(_)) => assert_eq!(started.elapsed(), Duration::from_secs(80)),
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn content_between_tool_call_deltas_and_a_reply_cut_at_its_token_limit() {
        let call = |index: u64, head: Option<(&str, &str)>, args: &str| {
            let mut c = json!({"index": index, "function": {"arguments": args}});
            if let Some((id, name)) = head {
                c["id"] = json!(id);
                c["function"]["name"] = json!(name);
            }
            Ok(json!({"choices": [{"delta": {"tool_calls": [c]}}]}))
        };
        let events: Vec<Result<Value, String>> = vec![
            piece("Here "),
            call(0, Some(("a", "rich_send")), "{\"x\":"),
            piece("it "),
            call(1, Some(("b", "rich_send")), "{\"y\""),
            call(0, None, " 1}"),
            piece("is."),
            call(1, None, ": \"tru"),
            Ok(json!({"choices": [{"delta": {}, "finish_reason": "length"}]})),
            Ok(json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}})),
        ];
        let (live, _watch) = tokio::sync::watch::channel(String::new());
        let reply = read(futures::stream::iter(events), &live, PACE, &Alive::new(), None).await.expect("a reply");
        assert_eq!(reply.text.as_deref(), Some("Here it is."));
        let mut cut = ToolCall::new("b", "rich_send", "{\"y\": \"tru");
        cut.cut = true;
        assert_eq!(reply.tool_calls, vec![ToolCall::new("a", "rich_send", "{\"x\": 1}"), cut]);
        assert_eq!(reply.usage, Usage { prompt: 5, completion: 9, cached: 0 });
    }

    fn scored(content: &str, logprob: f64) -> Result<Value, String> {
        Ok(json!({"choices": [{"delta": {"content": content}, "finish_reason": null,
            "logprobs": {"content": [{"token": content, "logprob": logprob, "bytes": [], "top_logprobs": []}]}}]}))
    }

    #[tokio::test]
    async fn word_salad_is_cut_off_once_it_is_judged_and_never_shows_live() {
        let (live, watch) = tokio::sync::watch::channel(String::new());
        let mut events: Vec<Result<Value, String>> = (0..24).map(|i| scored(&format!("w{i} "), -4.5)).collect();
        // Never read: the reply ended at the 24th token.
        events.push(Err("never read".into()));
        let reply = read(futures::stream::iter(events), &live, PACE, &Alive::new(), None).await.expect("a reply");
        assert!(reply.babbled(), "{reply:?}");
        assert_eq!(reply.odds.map(|o| o.tokens), Some(24));
        assert!(reply.text.as_deref().is_some_and(|t| t.starts_with("w0 w1")), "{reply:?}");
        assert_eq!(*watch.borrow(), "", "nothing showed live");

        // A fluent answer shows live once its first tokens are judged, and is whole.
        let (events, stream) = futures::channel::mpsc::unbounded::<Result<Value, String>>();
        let (live, watch) = tokio::sync::watch::channel(String::new());
        let reading = tokio::spawn(async move { read(stream, &live, PACE, &Alive::new(), None).await });
        let settle = || async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        };
        for i in 0..23 {
            events.unbounded_send(scored(&format!("w{i} "), -0.3)).expect("send");
        }
        settle().await;
        assert_eq!(*watch.borrow(), "", "23 tokens are not judged yet");
        events.unbounded_send(scored("w23 ", -0.3)).expect("send");
        settle().await;
        assert!(watch.borrow().ends_with("w22 w23 "), "{:?}", *watch.borrow());
        for i in 24..30 {
            events.unbounded_send(scored(&format!("w{i} "), -0.3)).expect("send");
        }
        events.unbounded_send(stop()).expect("send");
        drop(events);
        let reply = reading.await.expect("task").expect("a reply");
        assert!(!reply.babbled());
        assert_eq!(reply.odds.map(|o| o.tokens), Some(30));
        assert!(reply.text.as_deref().is_some_and(|t| t.ends_with("w29 ")));
    }
}
