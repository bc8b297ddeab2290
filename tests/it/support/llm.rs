//! The only stand-in: an OpenAI-compatible chat server on a loopback port, scripted per
//! test (tool calls, text, malformed arguments, errors, delays, a call that never answers)
//! and recording every request it got.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone)]
pub enum Step {
    Text(String),
    /// Tool calls: (name, arguments as the model would send them: JSON text, maybe broken).
    Calls(Vec<(String, String)>),
    Status(u16),
    Delay(Duration, Box<Step>),
    /// Never answers (the request hangs until the client gives up or is killed).
    Hang,
    /// 429 with `Retry-After: secs`.
    RetryAfter(u64),
    /// Streamed: a ping (an SSE comment, as llama.cpp sends while it reads a prompt) every
    /// `Duration`, this many, then the text. Whole: the text after as long.
    Pinged(usize, Duration, String),
    /// Text in these pieces, one event every `Duration` (streamed; whole when the request
    /// does not stream).
    Pieces(Vec<String>, Duration),
    /// Like `Pieces`, then the connection drops before the stream ends.
    Cut(Vec<String>, Duration),
    /// Like `Pieces`, then the stream closes cleanly without saying it finished (no
    /// `finish_reason`, no usage, no `[DONE]`).
    Unfinished(Vec<String>, Duration),
    /// Some text, then tool calls, in one reply.
    Say(String, Vec<(String, String)>),
    /// Tool calls, the reply stopped at its token limit (`finish_reason: "length"`).
    Length(Vec<(String, String)>),
    /// Streamed: each text piece, then the next call's first half; then the calls' second
    /// halves, each followed by the next piece: text and tool-call deltas mixed. Whole:
    /// the text, then the calls.
    Mixed(Vec<String>, Vec<(String, String)>),
    /// llama.cpp when it cannot parse the tool call the model wrote: 500 "Failed to parse
    /// tool call arguments as JSON" (whole), or the same error as an event of a stream
    /// answered 200 (streamed).
    Unreadable,
    /// Text in tokens, each with the log-probability the model gave it (`logprobs`), as
    /// llama.cpp and OpenAI report them: one token a chunk (streamed), or all of them in
    /// the choice (whole).
    Scored(Vec<(String, f64)>),
}

/// `n` tokens of word salad, each as unlikely as a lost small model makes them.
pub fn salad(n: usize) -> Step {
    let words = ["antonopoulos)", " WebSite", " comp.lang", ".Overrideumo", " Bayern", " Sachs0]oute", "ça500an"];
    Step::Scored((0..n).map(|i| (words[i % words.len()].to_owned(), -5.0)).collect())
}

pub fn call(name: &str, args: Value) -> Step {
    Step::Calls(vec![(name.to_owned(), args.to_string())])
}

pub fn text(t: &str) -> Step {
    Step::Text(t.to_owned())
}

type Responder = Arc<dyn Fn(&Value) -> Step + Send + Sync>;

#[derive(Clone, Default)]
struct Shared {
    script: Arc<Mutex<VecDeque<Step>>>,
    responder: Arc<Mutex<Option<Responder>>>,
    requests: Arc<Mutex<Vec<Value>>>,
    /// Reported usage (prompt, completion, of the prompt cached); (100, 20, 0) unless set.
    usage: Arc<Mutex<Option<(u64, u64, u64)>>>,
    /// When set, requests without `Authorization: Bearer <key>` get 401.
    key: Arc<Mutex<Option<String>>>,
    /// When (wall clock, ms) each stream sent its first piece of text.
    first_pieces: Arc<Mutex<Vec<i64>>>,
    /// Refuse streamed requests with a 400, as some servers do.
    no_streaming: Arc<Mutex<bool>>,
    /// Requests being answered now, and the most at once so far.
    in_flight: Arc<Mutex<(usize, usize)>>,
    /// The models `GET /models` lists (`test-model` unless set).
    models: Arc<Mutex<Option<Vec<String>>>>,
    /// The `Authorization` header of each chat request, in order.
    auth: Arc<Mutex<Vec<Option<String>>>>,
    /// Refuse requests that ask for `logprobs` with a 400 saying this, as some endpoints
    /// do (llama.cpp's server when the request has tools and streams).
    no_logprobs: Arc<Mutex<Option<String>>>,
    /// Refuse requests with llama.cpp's own `n_probs`, as strict endpoints refuse any
    /// field they do not know.
    no_n_probs: Arc<Mutex<bool>>,
}

pub struct FakeLlm {
    pub base_url: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl FakeLlm {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let app = Router::new()
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(complete))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { base_url, shared, task }
    }

    /// Queues answers, used in order; when the queue is empty the responder (or
    /// `[no reply]`) answers.
    pub fn script(&self, steps: impl IntoIterator<Item = Step>) {
        self.shared.script.lock().expect("lock").extend(steps);
    }

    /// Answers every request by looking at it (for tests where order is not fixed).
    pub fn respond_with(&self, f: impl Fn(&Value) -> Step + Send + Sync + 'static) {
        *self.shared.responder.lock().expect("lock") = Some(Arc::new(f));
    }

    /// Refuses streamed requests (400) from now on, as servers without streaming do.
    pub fn refuse_streaming(&self) {
        *self.shared.no_streaming.lock().expect("lock") = true;
    }

    /// When (wall clock, ms) each stream sent its first piece of text, in order.
    pub fn refuse_logprobs(&self, message: &str) {
        *self.shared.no_logprobs.lock().expect("lock") = Some(message.to_owned());
    }

    pub fn refuse_n_probs(&self) {
        *self.shared.no_n_probs.lock().expect("lock") = true;
    }

    pub fn first_pieces(&self) -> Vec<i64> {
        self.shared.first_pieces.lock().expect("lock").clone()
    }

    /// Refuses (401) every request without `Authorization: Bearer <key>` from now on.
    pub fn require_key(&self, key: &str) {
        *self.shared.key.lock().expect("lock") = Some(key.to_owned());
    }

    /// Reports this usage (prompt, completion tokens) from now on.
    pub fn set_usage(&self, prompt: u64, completion: u64) {
        self.set_usage_cached(prompt, completion, 0);
    }

    /// Reports this usage, `cached` of the prompt tokens reused from a cache (as OpenAI
    /// says it: `prompt_tokens_details.cached_tokens`).
    pub fn set_usage_cached(&self, prompt: u64, completion: u64, cached: u64) {
        *self.shared.usage.lock().expect("lock") = Some((prompt, completion, cached));
    }

    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().expect("lock").clone()
    }

    /// Lists these models from now on.
    pub fn set_models(&self, models: &[&str]) {
        *self.shared.models.lock().expect("lock") = Some(models.iter().map(|m| (*m).to_owned()).collect());
    }

    /// The `Authorization` header of each chat request so far.
    pub fn auth_headers(&self) -> Vec<Option<String>> {
        self.shared.auth.lock().expect("lock").clone()
    }

    /// The most requests that were being answered at once.
    pub fn most_at_once(&self) -> usize {
        self.shared.in_flight.lock().expect("lock").1
    }
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<Mutex<(usize, usize)>>);

impl InFlight {
    fn new(counter: &Arc<Mutex<(usize, usize)>>) -> Self {
        let mut c = counter.lock().expect("lock");
        c.0 += 1;
        c.1 = c.1.max(c.0);
        Self(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().expect("lock").0 -= 1;
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether the request carries the key the server was told to require (if any).
fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    let want = shared.key.lock().expect("lock").clone();
    want.is_none_or(|k| headers.get("authorization").and_then(|h| h.to_str().ok()) == Some(&format!("Bearer {k}")))
}

fn unauthorized() -> Response {
    let body = json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
    (StatusCode::UNAUTHORIZED, Json(body)).into_response()
}

async fn models(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    let models = shared.models.lock().expect("lock").clone().unwrap_or_else(|| vec!["test-model".to_owned()]);
    let data: Vec<Value> = models.iter().map(|m| json!({"id": m, "object": "model"})).collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

async fn complete(State(shared): State<Shared>, headers: HeaderMap, Json(request): Json<Value>) -> Response {
    if !authorized(&shared, &headers) {
        return unauthorized();
    }
    shared.requests.lock().expect("lock").push(request.clone());
    let auth = headers.get("authorization").and_then(|h| h.to_str().ok()).map(str::to_owned);
    shared.auth.lock().expect("lock").push(auth);
    let _counted = InFlight::new(&shared.in_flight);
    if request.get("stream").and_then(Value::as_bool) == Some(true) && *shared.no_streaming.lock().expect("lock") {
        let body = json!({"error": {"message": "stream is not supported", "type": "invalid_request_error", "param": "stream", "code": null}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    let refusal = shared.no_logprobs.lock().expect("lock").clone().filter(|_| request.get("logprobs").is_some());
    let refusal = refusal.or_else(|| {
        (request.get("n_probs").is_some() && *shared.no_n_probs.lock().expect("lock"))
            .then(|| "Unrecognized request argument supplied: n_probs".to_owned())
    });
    if let Some(message) = refusal {
        let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    if let Some(bad) = unparsable_history(&request) {
        // As llama.cpp's template renderer: the whole request is refused.
        let error = json!({"error": {"code": 500, "type": "server_error",
            "message": format!("Failed to parse tool call arguments as JSON: {bad:?}")}});
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(error)).into_response();
    }
    let step = shared.script.lock().expect("lock").pop_front();
    let step = step.unwrap_or_else(|| match shared.responder.lock().expect("lock").as_ref() {
        Some(f) => f(&request),
        None => text("[no reply]"),
    });
    let usage = shared.usage.lock().expect("lock").unwrap_or((100, 20, 0));
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    answer(step, usage, streaming, &shared.first_pieces).await
}

/// The first tool call in the request's history whose arguments are not a JSON object:
/// servers that render the history through a template parse them all.
fn unparsable_history(request: &Value) -> Option<String> {
    let messages = request["messages"].as_array()?;
    let calls = messages.iter().filter_map(|m| m["tool_calls"].as_array()).flatten();
    let arguments = calls.map(|c| c["function"]["arguments"].as_str().unwrap_or_default());
    arguments.into_iter().find(|a| !serde_json::from_str::<Value>(a).is_ok_and(|v| v.is_object())).map(str::to_owned)
}

/// One SSE event of a chat-completion chunk with `delta`.
fn chunk(delta: Value) -> String {
    let c = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
    format!("data: {c}\n\n")
}

/// How a streamed answer ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// A last chunk with this `finish_reason`, the usage, and `[DONE]`, as real APIs do.
    Finished(&'static str),
    /// The connection drops.
    Dropped,
    /// The body just ends.
    Closed,
}

/// A streamed answer: `events` each after `every`, then as `end` says.
fn sse(
    events: Vec<String>,
    every: Duration,
    usage: (u64, u64, u64),
    end: End,
    first: Option<&Arc<Mutex<Vec<i64>>>>,
) -> Response {
    let first = first.cloned();
    let cut = end == End::Dropped;
    let mut tail = Vec::new();
    if let End::Finished(reason) = end {
        let f = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]});
        tail.push(format!("data: {f}\n\n"));
        let u = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
            "choices": [], "usage": usage_of(usage)});
        tail.push(format!("data: {u}\n\n"));
        tail.push("data: [DONE]\n\n".to_owned());
    }
    let items: Vec<(String, bool)> =
        events.into_iter().map(|e| (e, true)).chain(tail.into_iter().map(|e| (e, false))).collect();
    let stream = futures::stream::unfold((items.into_iter(), cut, first), move |(mut it, cut, first)| async move {
        match it.next() {
            Some((event, paced)) => {
                if paced {
                    tokio::time::sleep(every).await;
                }
                let first = match first {
                    Some(f) if paced => {
                        f.lock().expect("lock").push(richbot::clock::now_ms());
                        None
                    }
                    other => other,
                };
                Some((Ok::<_, std::io::Error>(event), (it, cut, first)))
            }
            None if cut => {
                tokio::time::sleep(every).await;
                Some((Err(std::io::Error::other("the stream was cut")), (it, false, first)))
            }
            None => None,
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(stream))
        .expect("a response")
}

async fn answer(step: Step, usage: (u64, u64, u64), streaming: bool, first: &Arc<Mutex<Vec<i64>>>) -> Response {
    let mut step = step;
    loop {
        match step {
            Step::Delay(d, next) => {
                tokio::time::sleep(d).await;
                step = *next;
            }
            Step::Hang => std::future::pending::<()>().await,
            Step::RetryAfter(secs) => {
                let mut r = (StatusCode::TOO_MANY_REQUESTS, Json(json!({"error": {"message": "slow down", "type": "rate_limit_error", "param": null, "code": null}}))).into_response();
                r.headers_mut().insert("retry-after", secs.to_string().parse().expect("header"));
                return r;
            }
            // A 400 as llama.cpp's server writes it (the status as a number in `code`);
            // the others as OpenAI does.
            Step::Status(400) => {
                let body =
                    json!({"error": {"code": 400, "message": "scripted failure", "type": "invalid_request_error"}});
                return (StatusCode::BAD_REQUEST, Json(body)).into_response();
            }
            Step::Unreadable => {
                let error = json!({"error": {"code": 500, "type": "server_error",
                    "message": "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 210"}});
                if streaming {
                    return sse(vec![format!("data: {error}\n\n")], Duration::ZERO, usage, End::Closed, None);
                }
                return (StatusCode::INTERNAL_SERVER_ERROR, Json(error)).into_response();
            }
            Step::Status(code) => {
                let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return (status, Json(json!({"error": {"message": "scripted failure", "type": "server_error", "param": null, "code": null}}))).into_response();
            }
            Step::Pinged(pings, every, t) if !streaming => {
                step = Step::Delay(every * u32::try_from(pings).unwrap_or(u32::MAX), Box::new(Step::Text(t)));
            }
            Step::Pinged(pings, every, t) => {
                let mut events = vec![": ping\n\n".to_owned(); pings];
                events.push(chunk(json!({"role": "assistant", "content": t})));
                return sse(events, every, usage, End::Finished("stop"), None);
            }
            Step::Scored(tokens) if streaming => {
                let events = tokens
                    .iter()
                    .map(|(token, logprob)| {
                        let c = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
                            "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": null,
                                "logprobs": {"content": [{"token": token, "logprob": logprob, "bytes": [], "top_logprobs": []}]}}]});
                        format!("data: {c}\n\n")
                    })
                    .collect();
                return sse(events, Duration::ZERO, usage, End::Finished("stop"), None);
            }
            Step::Scored(tokens) => {
                let text: String = tokens.iter().map(|(t, _)| t.as_str()).collect();
                let content: Vec<Value> = tokens
                    .iter()
                    .map(|(t, l)| json!({"token": t, "logprob": l, "bytes": [], "top_logprobs": []}))
                    .collect();
                let mut body = completion(json!({"role": "assistant", "content": text}), "stop", usage);
                body["choices"][0]["logprobs"] = json!({"content": content});
                return Json(body).into_response();
            }
            Step::Text(t) if streaming => {
                let pieces = [chunk(json!({"role": "assistant", "content": ""})), chunk(json!({"content": t}))];
                return sse(pieces.to_vec(), Duration::ZERO, usage, End::Finished("stop"), None);
            }
            Step::Text(t) => {
                return Json(completion(json!({"role": "assistant", "content": t}), "stop", usage)).into_response();
            }
            Step::Say(said, calls) if streaming => {
                let mut events = vec![chunk(json!({"content": said}))];
                for (i, (name, args)) in calls.iter().enumerate() {
                    events.push(chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}_{}", rand_id()), "type": "function", "function": {"name": name, "arguments": args}}]})));
                }
                return sse(events, Duration::from_millis(300), usage, End::Finished("tool_calls"), Some(first));
            }
            Step::Say(said, calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                let message = json!({"role": "assistant", "content": said, "tool_calls": calls});
                return Json(completion(message, "tool_calls", usage)).into_response();
            }
            Step::Pieces(pieces, every) | Step::Cut(pieces, every) | Step::Unfinished(pieces, every) if !streaming => {
                let _ = every;
                step = Step::Text(pieces.concat());
            }
            Step::Pieces(ref pieces, every) | Step::Cut(ref pieces, every) | Step::Unfinished(ref pieces, every) => {
                let end = match step {
                    Step::Cut(..) => End::Dropped,
                    Step::Unfinished(..) => End::Closed,
                    _ => End::Finished("stop"),
                };
                let chunks = pieces.iter().map(|p| chunk(json!({"content": p}))).collect();
                return sse(chunks, every, usage, end, Some(first));
            }
            Step::Mixed(pieces, calls) if !streaming => step = Step::Say(pieces.concat(), calls),
            Step::Mixed(pieces, calls) => {
                let mut pieces = pieces.into_iter().map(|p| chunk(json!({"content": p})));
                let halves: Vec<[String; 2]> =
                    calls.iter().enumerate().map(|(i, (n, a))| call_halves(i, n, a)).collect();
                let mut events = Vec::new();
                for [head, _] in &halves {
                    events.extend(pieces.next());
                    events.push(head.clone());
                }
                for [_, rest] in &halves {
                    events.push(rest.clone());
                    events.extend(pieces.next());
                }
                events.extend(pieces);
                return sse(events, Duration::ZERO, usage, End::Finished("tool_calls"), None);
            }
            Step::Length(calls) if streaming => {
                let events = calls.iter().enumerate().flat_map(|(i, (n, a))| call_halves(i, n, a)).collect();
                return sse(events, Duration::ZERO, usage, End::Finished("length"), None);
            }
            Step::Length(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| json!({"id": format!("call_{i}_{}", rand_id()), "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                let message = json!({"role": "assistant", "content": null, "tool_calls": calls});
                return Json(completion(message, "length", usage)).into_response();
            }
            Step::Calls(calls) if streaming => {
                let events =
                    calls.iter().enumerate().flat_map(|(i, (name, args))| call_halves(i, name, args)).collect();
                return sse(events, Duration::ZERO, usage, End::Finished("tool_calls"), None);
            }
            Step::Calls(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| json!({"id": format!("call_{i}_{}", rand_id()), "type": "function", "function": {"name": name, "arguments": args}}))
                    .collect();
                return Json(completion(
                    json!({"role": "assistant", "content": null, "tool_calls": calls}),
                    "tool_calls",
                    usage,
                ))
                .into_response();
            }
        }
    }
}

/// Call `i` as two stream events: its id, name and the first half of its arguments, then
/// the rest of them.
fn call_halves(i: usize, name: &str, args: &str) -> [String; 2] {
    let mut half = args.len() / 2;
    while !args.is_char_boundary(half) {
        half -= 1;
    }
    let (head, rest) = args.split_at(half);
    [
        chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_{i}_{}", rand_id()), "type": "function", "function": {"name": name, "arguments": head}}]}),
        ),
        chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": rest}}]})),
    ]
}

fn completion(message: Value, finish: &str, usage: (u64, u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_of(usage)
    })
}

/// The `usage` object, as OpenAI writes it.
fn usage_of((prompt, done, cached): (u64, u64, u64)) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done,
        "prompt_tokens_details": {"cached_tokens": cached}})
}

fn rand_id() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 8)
}

/// The text of the last tool result in a request, parsed.
pub fn last_tool_result(request: &Value) -> Option<Value> {
    let messages = request.get("messages")?.as_array()?;
    let m = messages.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("tool"))?;
    serde_json::from_str(m.get("content")?.as_str()?).ok()
}
