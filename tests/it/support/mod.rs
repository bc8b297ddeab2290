//! Test support shared by the end-to-end tests: a real Synapse, the scripted LLM, richbot
//! itself (in-process or as the real binary), and plain-HTTP human users.

pub mod answers;
pub mod bridge;
pub mod courier;
pub mod e2ee;
pub mod fake_hs;
pub mod llama;
pub mod llm;
pub mod lossy;
pub mod mcp;
pub mod olm_device;
pub mod postgres;
pub mod qwen;
pub mod speech;
pub mod synapse;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Method;
use richbot::config::{self, Settings};
use serde_json::{Value, json};

pub use llm::FakeLlm;
pub use synapse::Synapse;

/// Every file under `dir` (its folders too) whose name ends in `.{ext}`.
pub fn files_under(dir: &std::path::Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    out
}

/// Waits until `f` returns `Some`, polling; panics with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A running richbot (in-process).
pub struct Bot {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Bot {
    pub async fn start(settings: Settings, listener: tokio::net::TcpListener) -> Self {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            richbot::run(settings, listener, async {
                let _ = rx.await;
            })
            .await
            .expect("richbot ran");
        });
        Self { stop: Some(tx), task: Some(task) }
    }

    /// Graceful stop; returns once the listener is closed.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// A human user, driven over plain HTTP.
#[derive(Clone)]
pub struct User {
    pub token: String,
    hs: String,
    http: reqwest::Client,
}

impl User {
    pub async fn register(hs: &str, name: &str) -> Self {
        let http = reqwest::Client::new();
        let url = format!("{hs}/_matrix/client/v3/register");
        let body = json!({"username": name, "password": "correct horse battery", "inhibit_login": false});
        let first: Value = http.post(&url).json(&body).send().await.expect("register").json().await.expect("json");
        let session = first.get("session").cloned().unwrap_or(Value::Null);
        let mut body = body;
        body["auth"] = json!({"type": "m.login.dummy", "session": session});
        let done: Value = http.post(&url).json(&body).send().await.expect("register").json().await.expect("json");
        Self {
            token: done["access_token"].as_str().unwrap_or_else(|| panic!("registered: {done}")).to_owned(),
            hs: hs.to_owned(),
            http,
        }
    }

    /// One request as this user. A homeserver that is restarting (refused, or a kept-alive
    /// connection dropped) is waited for, up to a minute, as a person's client would; the
    /// requests the tests make are idempotent (a send carries its transaction id).
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut req = self.http.request(method.clone(), format!("{}{path}", self.hs)).bearer_auth(&self.token);
            if let Some(b) = &body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    return (status, resp.json().await.unwrap_or(Value::Null));
                }
                Err(e) if !e.is_timeout() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("{path}: {e}"),
            }
        }
    }

    async fn ok(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method, path, body).await;
        assert_eq!(status, 200, "{path}: {v}");
        v
    }

    pub async fn create_room(&self, invite: &[&str], is_direct: bool) -> String {
        self.create_room_with(json!({"invite": invite, "is_direct": is_direct, "preset": "private_chat"})).await
    }

    pub async fn create_room_with(&self, body: Value) -> String {
        let v = self.ok(Method::POST, "/_matrix/client/v3/createRoom", Some(body)).await;
        v["room_id"].as_str().expect("room id").to_owned()
    }

    pub async fn invite(&self, room: &str, user: &str) {
        self.ok(
            Method::POST,
            &format!("/_matrix/client/v3/rooms/{}/invite", enc(room)),
            Some(json!({"user_id": user})),
        )
        .await;
    }

    pub async fn join(&self, room: &str) {
        self.ok(Method::POST, &format!("/_matrix/client/v3/rooms/{}/join", enc(room)), Some(json!({}))).await;
    }

    pub async fn leave(&self, room: &str) {
        self.ok(Method::POST, &format!("/_matrix/client/v3/rooms/{}/leave", enc(room)), Some(json!({}))).await;
    }

    pub async fn send(&self, room: &str, event_type: &str, content: Value) -> String {
        let txn = format!("t{}", rand_suffix());
        let v = self
            .ok(Method::PUT, &format!("/_matrix/client/v3/rooms/{}/send/{event_type}/{txn}", enc(room)), Some(content))
            .await;
        v["event_id"].as_str().expect("event id").to_owned()
    }

    /// Uploads `bytes` to the media repository; returns its `mxc://` URL.
    pub async fn upload(&self, bytes: Vec<u8>, content_type: &str, filename: &str) -> String {
        let url = format!("{}/_matrix/media/v3/upload?filename={}", self.hs, enc(filename));
        let response = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .header("content-type", content_type)
            .body(bytes)
            .send()
            .await
            .expect("upload");
        let v: Value = response.json().await.expect("upload answer");
        v["content_uri"].as_str().unwrap_or_else(|| panic!("an mxc URL: {v}")).to_owned()
    }

    /// The bytes of `mxc` and its `Content-Type`, fetched as this user (authenticated media).
    pub async fn download(&self, mxc: &str) -> (Vec<u8>, String) {
        let rest = mxc.strip_prefix("mxc://").unwrap_or_else(|| panic!("an mxc URL: {mxc}"));
        let url = format!("{}/_matrix/client/v1/media/download/{rest}", self.hs);
        let response = self.http.get(url).bearer_auth(&self.token).send().await.expect("download");
        assert_eq!(response.status().as_u16(), 200, "download {mxc}");
        let mime = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        (response.bytes().await.expect("media bytes").to_vec(), mime)
    }

    pub async fn say(&self, room: &str, body: &str) -> String {
        self.send(room, "m.room.message", json!({"msgtype": "m.text", "body": body})).await
    }

    pub async fn joined_members(&self, room: &str) -> Vec<String> {
        let v = self.ok(Method::GET, &format!("/_matrix/client/v3/rooms/{}/joined_members", enc(room)), None).await;
        v["joined"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
    }

    /// The room's timeline, oldest first.
    pub async fn messages(&self, room: &str) -> Vec<Value> {
        let v = self
            .ok(Method::GET, &format!("/_matrix/client/v3/rooms/{}/messages?dir=b&limit=200", enc(room)), None)
            .await;
        let mut events = v["chunk"].as_array().cloned().unwrap_or_default();
        events.reverse();
        events
    }

    /// Messages (`m.room.message`) sent by `sender`, oldest first.
    pub async fn messages_from(&self, room: &str, sender: &str) -> Vec<Value> {
        self.messages(room)
            .await
            .into_iter()
            .filter(|e| e["type"] == "m.room.message" && e["sender"] == sender)
            .collect()
    }
}

pub fn enc(s: &str) -> String {
    richbot::matrix::enc(s)
}

fn rand_suffix() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 12)
}

/// Options for a test environment.
#[derive(Clone)]
pub struct Options {
    /// Extra TOML appended to the generated config.
    pub extra_toml: String,
    pub personas: Vec<(&'static str, &'static str)>,
    pub llm_timeout_secs: u64,
    /// The homeserver reaches richbot through a [`courier::Courier`] (which can hold back
    /// or lose the room keys transactions carry).
    pub courier: bool,
    /// The homeserver sends appservices to-device messages and key counts (what
    /// encryption needs), as the suite's Synapse does unless this is false.
    pub homeserver_encryption: bool,
    /// richbot reaches the homeserver through a [`lossy::Lossy`] (which can lose the
    /// answers to its encrypted sends).
    pub lossy: bool,
    /// Another model endpoint than the scripted one: (base_url, model, more `[llm]` lines).
    pub llm: Option<(String, String, String)>,
    /// More `[llm]` lines for the scripted model (`vision = false`).
    pub llm_lines: &'static str,
    /// The crypto secrets are sealed with a pickle key (`pickle.key` in the test's folder),
    /// as `richbot init` sets a deployment up; false: stored clear, as before the key.
    pub pickle_key: bool,
    /// Another appservice shares the homeserver (`bridge`), registered before richbot
    /// starts.
    pub bridge: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            extra_toml: String::new(),
            personas: vec![("richbot", "Richbot"), ("rb_helper", "Helper")],
            llm_timeout_secs: 20,
            courier: false,
            homeserver_encryption: true,
            lossy: false,
            llm: None,
            llm_lines: "",
            pickle_key: true,
            bridge: false,
        }
    }
}

/// Synapse + fake LLM + richbot + two human users.
pub struct Env {
    pub synapse: Synapse,
    pub llm: FakeLlm,
    pub bot: Bot,
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub alice: User,
    pub bob: User,
    /// Not in `access.allow`.
    pub mallory: User,
    pub bot_addr: SocketAddr,
    pub metrics_url: String,
    /// The bot's database (SQLite in `dir`, or PostgreSQL in the `it_postgres` run).
    pub db_url: String,
    /// Between the homeserver and richbot, when asked for (`Options::courier`).
    pub courier: Option<courier::Courier>,
    /// Between richbot and the homeserver's client API, when asked for (`Options::lossy`).
    pub lossy: Option<lossy::Lossy>,
}

pub const BOT: &str = "@richbot:localhost";
pub const HELPER: &str = "@rb_helper:localhost";

impl Env {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(opts: Options) -> Self {
        // richbot's logs, when a run asks for them (RUST_LOG), to read a failure by.
        if std::env::var_os("RUST_LOG").is_some() {
            let filter = tracing_subscriber::EnvFilter::from_default_env();
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
        }
        // richbot may be stopped and started again on this address: see `free_port`.
        let listener = synapse::listener().await;
        let bot_addr = listener.local_addr().expect("addr");
        let front = match opts.courier {
            true => Some(synapse::listener().await),
            false => None,
        };
        let as_addr = front.as_ref().map_or(bot_addr, |f| f.local_addr().expect("addr"));
        let encryption = opts.homeserver_encryption;
        let mut synapse = tokio::task::spawn_blocking(move || match encryption {
            true => Synapse::start(&format!("http://{as_addr}")),
            false => Synapse::start_without_encryption(&format!("http://{as_addr}")),
        })
        .await
        .expect("synapse");
        if opts.bridge {
            let registration = synapse.dir.join("bridge.yaml");
            bridge::start(&registration).await;
            synapse = tokio::task::spawn_blocking(move || {
                synapse.add_appservice(&registration);
                synapse
            })
            .await
            .expect("synapse with the bridge");
        }
        let courier = front.map(|f| courier::Courier::start(f, bot_addr));
        let llm = FakeLlm::start().await;
        let lossy = match opts.lossy {
            true => Some(lossy::Lossy::start(&synapse.url).await),
            false => None,
        };
        let homeserver = lossy.as_ref().map_or(synapse.url.clone(), |l| l.url.clone());
        let dir = tempfile::tempdir().expect("tempdir");
        let config_path = dir.path().join("richbot.toml");
        let db_url = postgres::database_url(dir.path(), "richbot.db").await;
        let mut toml = format!(
            "[homeserver]\nurl = \"{}\"\nserver_name = \"localhost\"\n\n[appservice]\nregistration = \"{}\"\nlisten = \"{bot_addr}\"\nbehind_proxy = {}\n\n\
             [database]\nurl = \"{}\"\n\n[llm]\nbase_url = \"{}\"\nmodel = \"{}\"\napi_key = \"test-key\"\ntimeout_secs = {}\n{}\n\
             [access]\nallow = [\"@alice:localhost\", \"@bob:localhost\"]\n\n",
            homeserver,
            synapse.registration.display(),
            courier.is_some(),
            db_url,
            opts.llm.as_ref().map_or(&llm.base_url, |(url, _, _)| url),
            opts.llm.as_ref().map_or("test-model", |(_, model, _)| model),
            opts.llm_timeout_secs,
            opts.llm.as_ref().map_or(opts.llm_lines, |(_, _, more)| more),
        );
        for (localpart, name) in &opts.personas {
            toml.push_str(&format!("[[personas]]\nlocalpart = \"{localpart}\"\ndisplay_name = \"{name}\"\nsystem_prompt = \"You are {name}.\"\n\n"));
        }
        let metrics_addr = format!("127.0.0.1:{}", synapse::free_port());
        toml.push_str(&format!("[metrics]\nlisten = \"{metrics_addr}\"\n\n"));
        toml.push_str(&opts.extra_toml);
        if opts.pickle_key {
            richbot::pickle::write_new(&dir.path().join("pickle.key")).expect("pickle key");
            toml = with_pickle_key(&toml);
        }
        std::fs::write(&config_path, toml).expect("config");
        let settings = settings(&config_path);
        let bot = Bot::start(settings, listener).await;
        let alice = User::register(&synapse.url, "alice").await;
        let bob = User::register(&synapse.url, "bob").await;
        let mallory = User::register(&synapse.url, "mallory").await;
        let metrics_url = format!("http://{metrics_addr}/metrics");
        Self { synapse, llm, bot, dir, config_path, alice, bob, mallory, bot_addr, metrics_url, db_url, courier, lossy }
    }

    /// The bot's Prometheus text.
    pub async fn metrics(&self) -> String {
        reqwest::get(&self.metrics_url).await.expect("metrics").text().await.expect("text")
    }

    pub fn settings(&self) -> Settings {
        settings(&self.config_path)
    }

    pub async fn start_bot_again(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.bot_addr).await.expect("rebind the bot address");
        self.bot = Bot::start(self.settings(), listener).await;
    }

    /// A DM between alice and the default persona, joined.
    pub async fn dm(&self) -> String {
        let room = self.alice.create_room(&[BOT], true).await;
        self.wait_joined(&room, BOT).await;
        room
    }

    pub async fn wait_joined(&self, room: &str, user: &str) {
        self.wait_joined_seen_by(&self.alice, room, user).await;
    }

    /// Waits until `user` is joined to `room`, as `viewer` (a member) sees it.
    pub async fn wait_joined_seen_by(&self, viewer: &User, room: &str, user: &str) {
        let alice = viewer.clone();
        eventually(&format!("{user} joins {room}"), Duration::from_secs(60), || {
            let alice = alice.clone();
            async move { alice.joined_members(room).await.iter().any(|u| u == user).then_some(()) }
        })
        .await;
    }

    /// Waits until `sender` has posted `n` messages in `room`, and returns them.
    pub async fn wait_messages(&self, room: &str, sender: &str, n: usize) -> Vec<Value> {
        self.wait_messages_seen_by(&self.alice, room, sender, n).await
    }

    /// [`Env::wait_messages`] read by `viewer` (for rooms alice is not in).
    pub async fn wait_messages_seen_by(&self, viewer: &User, room: &str, sender: &str, n: usize) -> Vec<Value> {
        let alice = viewer.clone();
        eventually(&format!("{n} message(s) from {sender}"), Duration::from_secs(60), || {
            let alice = alice.clone();
            async move {
                let m = alice.messages_from(room, sender).await;
                (m.len() >= n).then_some(m)
            }
        })
        .await
    }

    /// Opens the bot's database (read side, for assertions), with the bot's pickle key.
    pub async fn store(&self) -> richbot::store::Store {
        let store = richbot::store::Store::open(&self.db_url).await.expect("store");
        store.with_pickle_key(self.settings().pickle_key)
    }

    /// Waits until every turn in `room` is done, and at least `n` of them.
    pub async fn wait_turns(&self, room: &str, n: usize) -> Vec<(String, i64, i64, i64)> {
        let store = self.store().await;
        eventually(&format!("{n} finished turn(s)"), Duration::from_secs(60), || {
            let store = store.clone();
            async move {
                let t = store.turn_outcomes(&room_id(room)).await.expect("turns");
                (t.len() >= n).then_some(t)
            }
        })
        .await
    }
}

/// The real `richbot serve` on `config`, its stderr going to `stderr`, answering
/// `GET {health}` (`http://addr/health`) before this returns.
pub async fn serve_binary(
    config: &std::path::Path,
    stderr: std::process::Stdio,
    health: &str,
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"));
    command.args(["serve", "--config", config.to_str().expect("utf8")]);
    serve_command(command, stderr, health).await
}

impl Env {
    /// The real `richbot serve` on the test's config and address (the in-process bot
    /// stopped first), answering before this returns.
    pub async fn serve_binary(&self) -> tokio::process::Child {
        let health = format!("http://{}/health", self.bot_addr);
        serve_binary(&self.config_path, std::process::Stdio::inherit(), &health).await
    }
}

/// Sends `child` (a `richbot serve`) SIGTERM and waits a minute at most for it to exit.
pub async fn terminate(child: &mut tokio::process::Child) -> std::process::ExitStatus {
    let pid = child.id().expect("running").to_string();
    let sent = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.expect("kill");
    assert!(sent.success());
    tokio::time::timeout(Duration::from_secs(60), child.wait()).await.expect("richbot exits").expect("status")
}

/// [`serve_binary`] with a soft open-file limit of `nofile` (as a default systemd unit has).
pub async fn serve_binary_with_nofile(
    config: &std::path::Path,
    stderr: std::process::Stdio,
    health: &str,
    nofile: u32,
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new("bash");
    let script = format!("ulimit -Sn {nofile} && exec \"$0\" serve --config \"$1\"");
    command.args(["-c", &script, env!("CARGO_BIN_EXE_richbot"), config.to_str().expect("utf8")]);
    serve_command(command, stderr, health).await
}

async fn serve_command(
    mut command: tokio::process::Command,
    stderr: std::process::Stdio,
    health: &str,
) -> tokio::process::Child {
    let child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn richbot serve");
    eventually("richbot serve answers /health", Duration::from_secs(60), || async {
        reqwest::get(health).await.ok().filter(|r| r.status().is_success()).map(|_| ())
    })
    .await;
    child
}

/// The bodies of the `m.notice`s among `messages`, in order.
pub fn notices(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["content"]["msgtype"] == "m.notice")
        .filter_map(|m| m["content"]["body"].as_str().map(str::to_owned))
        .collect()
}

/// The approval of call `nth` of `turn` in `!r:x` by `@alice:x`, opened at `now` for a minute.
pub fn approval(turn: i64, nth: u32, now: i64) -> richbot::store::NewApproval<'static> {
    richbot::store::NewApproval {
        turn_id: turn,
        nth,
        room_id: ruma::room_id!("!r:x"),
        asker: ruma::user_id!("@alice:x"),
        tool: "t__delete",
        shown_hash: "h",
        now,
        expires_at: now + 60_000,
    }
}

/// A room id the tests got as text (from the homeserver's JSON), as the store takes it.
pub fn room_id(room: &str) -> ruma::OwnedRoomId {
    ruma::OwnedRoomId::try_from(room).expect("a valid room id")
}

/// A user id written in a test.
pub fn user_id(user: &str) -> ruma::OwnedUserId {
    ruma::OwnedUserId::try_from(user).expect("a valid user id")
}

/// A plain text message from `@alice:x` in `room`, pending, as the inbox would store it.
pub fn message(id: &str, room: &str) -> richbot::store::NewEvent {
    richbot::store::NewEvent {
        event_id: id.try_into().expect("event id"),
        room_id: room.try_into().expect("room id"),
        sender: user_id("@alice:x"),
        event_type: "m.room.message".into(),
        state_key: None,
        origin_ts: 1,
        event: json!({"type": "m.room.message", "content": {"msgtype": "m.text", "body": id}}).to_string(),
        processed: false,
    }
}

/// `toml` with `encryption.pickle_key_file = "pickle.key"` (in its `[encryption]` table,
/// or a new one at the end).
pub fn with_pickle_key(toml: &str) -> String {
    let line = "pickle_key_file = \"pickle.key\"\n";
    match toml.contains("[encryption]\n") {
        true => toml.replacen("[encryption]\n", &format!("[encryption]\n{line}"), 1),
        false => format!("{toml}\n[encryption]\n{line}"),
    }
}

pub fn settings(path: &std::path::Path) -> Settings {
    config::load(path, std::iter::empty()).unwrap_or_else(|e| panic!("config: {e}"))
}
