//! A stand-in homeserver for what a real Synapse will not do on demand (a 429 with a given
//! `retry_after_ms`, a 502, a refusal after a join). It answers each request from a
//! handler, or from a script in order, and records what it was asked. Replies are named
//! after what the homeserver means by them (`Reply::ok`, `Reply::refused`,
//! `Reply::rate_limited`, `Reply::unavailable`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::any;
use serde_json::{Value, json};

/// One request as the stand-in saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    /// Path and query, percent-encoded as sent.
    pub uri: String,
    pub authorization: String,
}

impl Request {
    pub fn path(&self) -> &str {
        self.uri.split('?').next().unwrap_or_default()
    }
}

/// One answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    body: Value,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Self { status: 200, body }
    }

    /// A permanent refusal (`M_FORBIDDEN`, `M_USER_IN_USE`, ...).
    pub fn refused(status: u16, errcode: &str, error: &str) -> Self {
        Self { status, body: json!({"errcode": errcode, "error": error}) }
    }

    /// 429 `M_LIMIT_EXCEEDED`, asking for `retry_after_ms` in the body.
    pub fn rate_limited(retry_after_ms: u64) -> Self {
        Self { status: 429, body: json!({"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": retry_after_ms}) }
    }

    /// A server error, `status` 5xx.
    pub fn unavailable(status: u16) -> Self {
        Self { status, body: json!({}) }
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

/// A running stand-in homeserver on a loopback port.
pub struct FakeHs {
    pub url: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl FakeHs {
    /// Answers every request with `handler`.
    pub async fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let handler: Handler = Arc::new(handler);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = Router::new().fallback(any(move |method: Method, uri: Uri, headers: HeaderMap| {
            let (handler, log) = (handler.clone(), log.clone());
            async move {
                let authorization =
                    headers.get("authorization").and_then(|h| h.to_str().ok()).unwrap_or_default().to_owned();
                let request = Request { method, uri: uri.to_string(), authorization };
                let reply = handler(&request);
                log.lock().expect("lock").push(request);
                let status = StatusCode::from_u16(reply.status).expect("status");
                (status, axum::Json(reply.body)).into_response()
            }
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, seen }
    }

    /// Answers with `script` in order, then 500 forever.
    pub async fn scripted(script: Vec<Reply>) -> Self {
        let script = Mutex::new(VecDeque::from(script));
        Self::start(move |_| script.lock().expect("lock").pop_front().unwrap_or(Reply::unavailable(500))).await
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().expect("lock").clone()
    }
}
