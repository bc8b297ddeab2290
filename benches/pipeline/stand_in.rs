//! The two stand-ins richbot talks to in a benchmark, in this process on loopback ports:
//! a homeserver that takes every request (and notes when each room's first message from
//! a persona arrives) and an OpenAI-compatible LLM that answers after a set delay (noting
//! when each question's request arrived and when its answer left). The cost measured is
//! richbot's; these answer at once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// When things happened, by question number (`q-<n>` in the question's text, the room's
/// number in the room id `!q<n>:localhost`).
#[derive(Debug, Default)]
pub struct Log {
    /// LLM request arrived.
    pub asked: HashMap<u64, Instant>,
    /// LLM answer left.
    pub answered: HashMap<u64, Instant>,
    /// First persona message PUT in the room arrived at the homeserver.
    pub posted: HashMap<u64, Instant>,
}

pub type Shared = Arc<Mutex<Log>>;

/// Serves `app` on a free loopback port.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

/// The homeserver stand-in; returns its base URL.
pub async fn homeserver(log: Shared) -> String {
    let app = Router::new().fallback(hs).with_state(log);
    format!("http://{}", serve(app).await)
}

async fn hs(State(log): State<Shared>, method: Method, uri: Uri) -> Response {
    let path = uri.path();
    if method == Method::PUT && path.contains("/send/m.room.message/") {
        if let Some(n) = number_after(&path.replace("%21", "!"), "!q") {
            log.lock().expect("log").posted.entry(n).or_insert_with(Instant::now);
        }
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return axum::Json(json!({"event_id": format!("$sent{id}")})).into_response();
    }
    if path.ends_with("/ping") {
        return axum::Json(json!({"duration_ms": 1})).into_response();
    }
    axum::Json(json!({})).into_response()
}

/// The LLM stand-in answering after `delay`; returns its base URL (with `/v1`).
pub async fn llm(log: Shared, delay: Duration) -> String {
    let app = Router::new().fallback(move |state, body| chat(state, body, delay)).with_state(log);
    format!("http://{}/v1", serve(app).await)
}

async fn chat(State(log): State<Shared>, body: Bytes, delay: Duration) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // The member's last message (richbot may put a note of its own after it).
    let messages = request["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
    let n = messages.iter().rev().filter(|m| m["role"] == "user").find_map(|m| number_after(&m.to_string(), "q-"));
    if let Some(n) = n {
        log.lock().expect("log").asked.entry(n).or_insert_with(Instant::now);
    }
    tokio::time::sleep(delay).await;
    let text = format!("answer to q-{}", n.unwrap_or(0));
    let usage = json!({"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55});
    let response = if request["stream"] == json!(true) {
        let chunk = |delta: Value, finish: Value| {
            json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut sse = String::new();
        for event in [
            chunk(json!({"role": "assistant", "content": text}), Value::Null),
            chunk(json!({}), json!("stop")),
            json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench", "choices": [], "usage": usage}),
        ] {
            sse.push_str(&format!("data: {event}\n\n"));
        }
        sse.push_str("data: [DONE]\n\n");
        ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
    } else {
        axum::Json(json!({"id": "c", "object": "chat.completion", "created": 0, "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage}))
        .into_response()
    };
    if let Some(n) = n {
        log.lock().expect("log").answered.entry(n).or_insert_with(Instant::now);
    }
    response
}

/// The number right after `marker` in `text`.
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
