//! Between richbot and the homeserver's client API: forwards every request, records the
//! encrypted sends, and on demand loses the answers to them (the send lands, richbot gets
//! a 502 instead of the event id), as when a connection drops after the homeserver took a
//! message. Nothing is changed on the way in.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

#[derive(Clone)]
struct Inner {
    upstream: String,
    http: reqwest::Client,
    /// Answers to encrypted sends still to lose.
    lose: Arc<AtomicUsize>,
    /// Each encrypted send: its path (with the transaction id) and body.
    sends: Arc<Mutex<Vec<(String, Bytes)>>>,
}

pub struct Lossy {
    pub url: String,
    inner: Inner,
    _task: tokio::task::JoinHandle<()>,
}

impl Lossy {
    /// Forwards to `upstream` (the homeserver's URL).
    pub async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let inner = Inner {
            upstream: upstream.to_owned(),
            http: reqwest::Client::new(),
            lose: Arc::default(),
            sends: Arc::default(),
        };
        let app = axum::Router::new().fallback(forward).with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner, _task: task }
    }

    /// Loses the answers to the next `n` encrypted sends.
    pub fn lose(&self, n: usize) {
        self.inner.lose.store(n, Ordering::SeqCst);
    }

    /// The encrypted sends so far: path and body.
    pub fn sends(&self) -> Vec<(String, Bytes)> {
        self.inner.sends.lock().expect("lock").clone()
    }
}

async fn forward(State(p): State<Inner>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let encrypted_send = method == Method::PUT && path.contains("/send/m.room.encrypted/");
    if encrypted_send {
        p.sends.lock().expect("lock").push((path.split('?').next().unwrap_or_default().to_owned(), body.clone()));
    }
    let mut request = p.http.request(method, format!("{}{path}", p.upstream)).body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let Ok(answer) = request.send().await else { return (StatusCode::BAD_GATEWAY, "homeserver down").into_response() };
    let lost = encrypted_send && p.lose.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    if lost {
        return (StatusCode::BAD_GATEWAY, "the answer was lost on the way").into_response();
    }
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let bytes = answer.bytes().await.unwrap_or_default();
    (status, [("content-type", "application/json")], bytes).into_response()
}
