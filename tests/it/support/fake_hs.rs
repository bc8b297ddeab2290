//! A stand-in homeserver for what a real Synapse will not do on demand (a 429 with a given
//! `retry_after_ms`, a 502, a refusal after a join). It answers each request from a
//! handler, or from a script in order, and records what it was asked. Replies are named
//! after what the homeserver means by them (`Reply::ok`, `Reply::refused`,
//! `Reply::rate_limited`, `Reply::unavailable`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::any;
use richbot::store::Store;
use serde_json::{Value, json};

use super::eventually;

/// One request as the stand-in saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    /// Path and query, percent-encoded as sent.
    pub uri: String,
    pub authorization: String,
    /// The JSON body (null when there was none).
    pub body: Value,
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
        let app = Router::new().fallback(any(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (handler, log) = (handler.clone(), log.clone());
            async move {
                let authorization =
                    headers.get("authorization").and_then(|h| h.to_str().ok()).unwrap_or_default().to_owned();
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let request = Request { method, uri: uri.to_string(), authorization, body };
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

    /// The message contents sent so far (`PUT .../send/m.room.message/...`), in order.
    pub fn sent(&self) -> Vec<Value> {
        let sends = self.requests().into_iter().filter(|r| r.path().contains("/send/m.room.message/"));
        sends.map(|r| r.body).collect()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().expect("lock").clone()
    }
}

/// richbot, in-process, against a stand-in homeserver at `hs` and an LLM at `llm`; one
/// persona `@richbot:x`, and `@alice:x` allowed.
pub struct Bot {
    addr: SocketAddr,
    pub store: Store,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), richbot::Error>>,
    _dir: tempfile::TempDir,
}

impl Bot {
    /// `extra_toml` is appended to the config (e.g. a `[limits]` section).
    pub async fn start(hs: &str, llm: &str, extra_toml: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("reg.yaml"),
            "id: r\nurl: null\nas_token: as_token_for_the_tests\nhs_token: hs_token_for_the_tests\nsender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@rb_.*:x'}]\n",
        )
        .expect("reg");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let db = super::postgres::database_url(dir.path(), "bot.db").await;
        let toml = format!(
            "[homeserver]\nurl = \"{hs}\"\nserver_name = \"x\"\n[appservice]\nregistration = \"reg.yaml\"\nlisten = \"{addr}\"\n\
             [database]\nurl = \"{db}\"\n[llm]\nbase_url = \"{llm}\"\nmodel = \"m\"\ntimeout_secs = 2\n[access]\nallow = [\"@alice:x\", \"@bob:x\"]\n{extra_toml}",
        );
        let settings =
            richbot::config::from_str(&toml, "c.toml".as_ref(), dir.path(), std::iter::empty()).expect("settings");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(richbot::run(settings, listener, async {
            let _ = stopped.await;
        }));
        // Serving starts after the database is migrated: open it only then.
        eventually("richbot serves", Duration::from_secs(10), || async move {
            reqwest::get(format!("http://{addr}/health")).await.ok().filter(|r| r.status().is_success())
        })
        .await;
        let store = Store::open(&db).await.expect("store");
        Self { addr, store, stop: Some(stop), task, _dir: dir }
    }

    /// Pushes one transaction of `events`, as the homeserver would.
    pub async fn push(&self, txn: &str, events: Vec<Value>) {
        let resp = reqwest::Client::new()
            .put(format!("http://{}/_matrix/app/v1/transactions/{txn}", self.addr))
            .bearer_auth("hs_token_for_the_tests")
            .json(&json!({"events": events}))
            .send()
            .await
            .expect("push");
        assert_eq!(resp.status(), 200);
    }

    /// Waits for `n` finished turns in `!room:x`: (outcome, rounds, tokens in, out).
    pub async fn finished_turns(&self, n: usize) -> Vec<(String, i64, i64, i64)> {
        eventually(&format!("{n} finished turn(s)"), Duration::from_secs(30), || async {
            let t = self.store.turn_outcomes(ruma::room_id!("!room:x")).await.expect("turns");
            (t.len() >= n).then_some(t)
        })
        .await
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.expect("join").expect("ran");
    }
}

/// An invite of `@richbot:x` to the DM `!room:x` by `@alice:x`.
pub fn invite() -> Value {
    json!({"event_id": "$invite", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.member",
        "state_key": "@richbot:x", "origin_server_ts": 1, "content": {"membership": "invite", "is_direct": true}})
}

/// A text message in `!room:x`, sent now.
pub fn message(id: &str, sender: &str, body: &str) -> Value {
    json!({"event_id": id, "room_id": "!room:x", "sender": sender, "type": "m.room.message",
        "origin_server_ts": richbot::clock::now_ms(), "content": {"msgtype": "m.text", "body": body}})
}
