//! Between the homeserver and richbot, as a load balancer would sit: forwards every
//! request as it came, and on demand holds back the to-device messages transactions carry
//! (room keys travel that way) to hand them over later in a transaction of their own, as
//! when a key comes after its message, or loses them, as when it never comes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const TO_DEVICE: &str = "de.sorunome.msc2409.to_device";

/// What happens to to-device messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    Pass,
    Hold,
    Lose,
}

#[derive(Clone)]
struct Inner {
    target: SocketAddr,
    http: reqwest::Client,
    keys: Arc<Mutex<Keys>>,
    held: Arc<Mutex<Vec<Value>>>,
    /// The homeserver's `Authorization` header, to send held messages as it would.
    auth: Arc<Mutex<Option<String>>>,
}

pub struct Courier {
    inner: Inner,
    next: std::sync::atomic::AtomicU64,
    _task: tokio::task::JoinHandle<()>,
}

impl Courier {
    /// Serves on `listener`, forwarding to richbot at `target`.
    pub fn start(listener: tokio::net::TcpListener, target: SocketAddr) -> Self {
        let inner = Inner {
            target,
            http: reqwest::Client::new(),
            keys: Arc::new(Mutex::new(Keys::Pass)),
            held: Arc::default(),
            auth: Arc::default(),
        };
        let app = axum::Router::new().fallback(forward).with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { inner, next: std::sync::atomic::AtomicU64::new(0), _task: task }
    }

    pub fn keys(&self, mode: Keys) {
        *self.inner.keys.lock().expect("lock") = mode;
    }

    /// How many to-device messages are held.
    pub fn held(&self) -> usize {
        self.inner.held.lock().expect("lock").len()
    }

    /// Hands the held messages to richbot in a transaction of their own.
    pub async fn release(&self) {
        let held: Vec<Value> = std::mem::take(&mut *self.inner.held.lock().expect("lock"));
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let auth = self.inner.auth.lock().expect("lock").clone().expect("a transaction was forwarded before");
        let url = format!("http://{}/_matrix/app/v1/transactions/courier-{n}", self.inner.target);
        let answer = self
            .inner
            .http
            .put(url)
            .header("authorization", auth)
            .json(&json!({"events": [], TO_DEVICE: held}))
            .send()
            .await
            .expect("richbot answers");
        assert!(answer.status().is_success(), "the held messages were taken: {}", answer.status());
    }
}

async fn forward(State(c): State<Inner>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mode = *c.keys.lock().expect("lock");
    let mut body = body;
    if path.contains("/transactions/") {
        if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
            *c.auth.lock().expect("lock") = Some(auth.to_owned());
        }
        if mode != Keys::Pass
            && let Ok(mut txn) = serde_json::from_slice::<Value>(&body)
            && let Some(messages) = txn.get_mut(TO_DEVICE).and_then(Value::as_array_mut)
            && !messages.is_empty()
        {
            let taken = std::mem::take(messages);
            if mode == Keys::Hold {
                c.held.lock().expect("lock").extend(taken);
            }
            body = Bytes::from(serde_json::to_vec(&txn).expect("json"));
        }
    }
    let mut request = c.http.request(method, format!("http://{}{path}", c.target)).body(body);
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    let Ok(answer) = request.send().await else { return (StatusCode::BAD_GATEWAY, "richbot is down").into_response() };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let bytes = answer.bytes().await.unwrap_or_default();
    (status, [("content-type", "application/json")], bytes).into_response()
}
