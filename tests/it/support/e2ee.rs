//! A person with a real end-to-end encrypted client: `tests/e2ee/client.mjs`
//! (matrix-js-sdk with its Rust crypto, the crypto of Element Web) in a Node.js process,
//! installed by `scripts/install-e2ee-client.sh` into `target/e2ee-client` (cached),
//! logged in as a new device that bootstraps cross-signing. Driven one JSON command per
//! line; its logs go to a file beside the test's other logs.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const PREFIX: &str = "@@richbot ";
/// A command's answer comes within this (generous: a loaded machine, WASM start-up, a
/// login that bootstraps cross-signing, a wait the command itself bounds).
const ANSWER: Duration = Duration::from_secs(180);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dir() -> PathBuf {
    root().join("target/e2ee-client")
}

/// Installs the client once per test binary (the script itself is idempotent and locked).
fn install() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let status = std::process::Command::new("bash")
            .arg(root().join("scripts/install-e2ee-client.sh"))
            .arg(dir())
            .stdout(Stdio::null())
            .status()
            .expect("running install-e2ee-client.sh");
        assert!(status.success(), "installing the E2EE test client failed");
    });
}

/// One person's encrypted client (one device).
pub struct E2ee {
    pub user_id: String,
    pub device_id: String,
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    next: u64,
    pub log: PathBuf,
}

impl E2ee {
    /// Logs `user` (registered, with the suite's password) in on `hs` as a new device,
    /// which bootstraps cross-signing and starts syncing. `log_dir` gets its log.
    pub async fn login(hs: &str, user: &str, log_dir: &std::path::Path) -> Self {
        tokio::task::spawn_blocking(install).await.expect("install");
        let log = log_dir.join(format!("e2ee-{user}-{}.log", rand_suffix()));
        let err = std::fs::File::create(&log).expect("client log");
        let mut child = Command::new("node")
            .arg(dir().join("client.mjs"))
            .current_dir(dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("starting the E2EE client (node)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut me = Self { user_id: String::new(), device_id: String::new(), child, stdin, stdout, next: 0, log };
        let done = me.call(json!({"cmd": "login", "hs": hs, "user": user, "password": "correct horse battery"})).await;
        me.user_id = done["user_id"].as_str().expect("user id").to_owned();
        me.device_id = done["device_id"].as_str().expect("device id").to_owned();
        assert_eq!(done["cross_signed"], true, "the client bootstrapped cross-signing: {done}");
        me
    }

    /// One command; panics with the client's error (and where its log is) if it fails.
    pub async fn call(&mut self, mut command: Value) -> Value {
        self.next += 1;
        let id = self.next;
        command["id"] = json!(id);
        let line = format!("{command}\n");
        self.stdin.write_all(line.as_bytes()).await.expect("write to the E2EE client");
        self.stdin.flush().await.expect("flush");
        let answer = tokio::time::timeout(ANSWER, async {
            loop {
                let line = self
                    .stdout
                    .next_line()
                    .await
                    .expect("read the E2EE client")
                    .unwrap_or_else(|| panic!("the E2EE client exited; see {}", self.log.display()));
                if let Some(json) = line.strip_prefix(PREFIX) {
                    let v: Value = serde_json::from_str(json).expect("an answer");
                    if v["id"] == json!(id) {
                        return v;
                    }
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the E2EE client did not answer {command} in time; see {}", self.log.display()));
        assert_eq!(answer["ok"], true, "{command}: {}\n(log: {})", answer["error"], self.log.display());
        answer
    }

    /// An encrypted room made by this person, inviting `invite` (a DM when `direct`).
    pub async fn create_room(&mut self, invite: &[&str], direct: bool) -> String {
        self.create_room_with(invite, direct, true).await
    }

    /// A room made by this person, encrypted or not.
    pub async fn create_room_with(&mut self, invite: &[&str], direct: bool, encrypted: bool) -> String {
        let done =
            self.call(json!({"cmd": "create_room", "invite": invite, "direct": direct, "encrypted": encrypted})).await;
        done["room_id"].as_str().expect("room id").to_owned()
    }

    /// Turns encryption on in `room` (an `m.room.encryption` state event).
    pub async fn encrypt_room(&mut self, room: &str) {
        let content = json!({"algorithm": "m.megolm.v1.aes-sha2"});
        self.call(json!({"cmd": "state", "room": room, "type": "m.room.encryption", "content": content})).await;
    }

    pub async fn join(&mut self, room: &str) {
        self.call(json!({"cmd": "join", "room": room})).await;
    }

    /// Sends a text message (encrypted, in an encrypted room); its event id.
    pub async fn say(&mut self, room: &str, body: &str) -> String {
        self.send(room, json!({"msgtype": "m.text", "body": body})).await
    }

    pub async fn send(&mut self, room: &str, content: Value) -> String {
        let done = self.call(json!({"cmd": "send", "room": room, "content": content})).await;
        done["event_id"].as_str().expect("event id").to_owned()
    }

    /// Sends a picture or file (`msgtype`) encrypted as Element does: the bytes sealed
    /// with a fresh key, the key in the (encrypted) message. Its event id.
    pub async fn send_file(
        &mut self,
        room: &str,
        msgtype: &str,
        (bytes, mimetype, name): (&[u8], &str, &str),
        body: &str,
    ) -> String {
        self.send_file_with(room, msgtype, (bytes, mimetype, name), body, json!({})).await
    }

    /// [`send_file`](Self::send_file) with `extra` added to the content (and to its `info`).
    pub async fn send_file_with(
        &mut self,
        room: &str,
        msgtype: &str,
        (bytes, mimetype, name): (&[u8], &str, &str),
        body: &str,
        extra: Value,
    ) -> String {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        let command = json!({"cmd": "send_file", "room": room, "data": data, "msgtype": msgtype, "body": body, "name": name, "mimetype": mimetype, "extra": extra});
        let done = self.call(command).await;
        done["event_id"].as_str().expect("event id").to_owned()
    }

    /// Sends `content` as a to-device message of `event_type`, in the clear, to one
    /// device of `user`.
    pub async fn send_to_device(&mut self, event_type: &str, (user, device): (&str, &str), content: Value) {
        let messages = json!({user: {device: content}});
        self.call(json!({"cmd": "to_device", "type": event_type, "messages": messages})).await;
    }

    /// Sends an event of `event_type` (encrypted, in an encrypted room); its event id.
    pub async fn send_typed(&mut self, room: &str, event_type: &str, content: Value) -> String {
        let done = self.call(json!({"cmd": "send", "room": room, "type": event_type, "content": content})).await;
        done["event_id"].as_str().expect("event id").to_owned()
    }

    /// Sends an event of `event_type` sealed in an encrypted one, even a type the SDK
    /// never encrypts (a redaction); its event id.
    pub async fn send_sealed(&mut self, room: &str, event_type: &str, content: Value) -> String {
        let done = self.call(json!({"cmd": "send_sealed", "room": room, "type": event_type, "content": content})).await;
        done["event_id"].as_str().expect("event id").to_owned()
    }

    /// The wire content of an event of `event_type` encrypted for `room` by this device,
    /// not sent.
    pub async fn seal(&mut self, room: &str, event_type: &str, content: Value) -> Value {
        let done = self.call(json!({"cmd": "seal", "room": room, "type": event_type, "content": content})).await;
        done["content"].clone()
    }

    /// Asks `user` to verify in the DM `room`; how the request ended.
    pub async fn request_verification(&mut self, user: &str, room: &str) -> Value {
        self.call(json!({"cmd": "request_verification", "user": user, "room": room, "timeout_ms": 90_000})).await
    }

    /// Asks `user`'s `device` to verify, to-device; how the request ended.
    pub async fn request_device_verification(&mut self, user: &str, device: &str) -> Value {
        self.call(json!({"cmd": "request_verification", "user": user, "device": device, "timeout_ms": 90_000})).await
    }

    pub async fn redact(&mut self, room: &str, event: &str) {
        self.call(json!({"cmd": "redact", "room": room, "event_id": event})).await;
    }

    pub async fn wait_joined(&mut self, room: &str, user: &str) {
        self.call(json!({"cmd": "wait_joined", "room": room, "user": user, "timeout_ms": 90_000})).await;
    }

    /// Waits until `sender` has `n` messages in `room` that this client decrypted, and
    /// returns every event of the room's timeline. A message whose key is still on its way
    /// is not counted until it decrypts (a loaded machine delivers keys a sync late).
    pub async fn wait_messages(&mut self, room: &str, sender: &str, n: usize) -> Vec<Value> {
        let done = self
            .call(json!({"cmd": "wait_messages", "room": room, "sender": sender, "count": n, "timeout_ms": 120_000}))
            .await;
        done["events"].as_array().cloned().unwrap_or_default()
    }

    /// Waits for `n` events of `event_type` (clear type) from `sender`; the timeline.
    pub async fn wait_messages_of(&mut self, room: &str, sender: &str, n: usize, event_type: &str) -> Vec<Value> {
        let ask = json!({"cmd": "wait_messages", "room": room, "sender": sender, "count": n, "timeout_ms": 120_000, "type": event_type});
        self.call(ask).await["events"].as_array().cloned().unwrap_or_default()
    }

    /// The room's timeline as this client sees it now.
    pub async fn messages(&mut self, room: &str) -> Vec<Value> {
        let done = self.call(json!({"cmd": "messages", "room": room})).await;
        done["events"].as_array().cloned().unwrap_or_default()
    }

    /// Shares room keys only with devices their owner signed, and decrypts only from them
    /// (MSC4153, Element's "exclude insecure devices").
    pub async fn only_signed_devices(&mut self) {
        self.call(json!({"cmd": "isolation", "mode": "only_signed"})).await;
    }

    /// What this client knows of `user`'s device (the first, if none is named).
    pub async fn device_status(&mut self, user: &str) -> Value {
        self.call(json!({"cmd": "device_status", "user": user})).await
    }

    /// Asks the client to stop and waits (bounded) for it to exit, then kills it. It reads
    /// no answer: the client exits right after it answers, and a clean-clone CI run on a
    /// loaded machine saw the exit reach the pipe first, which `call` takes as a crash.
    pub async fn stop(mut self) {
        self.next += 1;
        let line = format!("{}\n", json!({"cmd": "stop", "id": self.next}));
        let _ = self.stdin.write_all(line.as_bytes()).await;
        let _ = self.stdin.flush().await;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

/// The messages from `sender` among `events`, as the client decrypted them.
pub fn from<'a>(events: &'a [Value], sender: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["sender"] == sender && e["type"] == "m.room.message").collect()
}

fn rand_suffix() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 6)
}
