//! A new admin's usual mistakes, through the real binary and, where the homeserver is part
//! of the mistake, a real Synapse: each one fails with the line that names the fix. And the
//! happy path: `init`, fill in the `[llm]` section, `serve`, and a DM is answered.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::synapse::{Synapse, free_port};
use crate::support::{FakeLlm, User, eventually};

/// `richbot <args>` from `cwd`, its output.
fn richbot(args: &[&str], cwd: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(args)
        .current_dir(cwd)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run richbot")
}

/// `richbot check` on `config`: exit code and what it printed.
fn check(config: &Path) -> (Option<i32>, String) {
    let out = richbot(&["check", "--config", config.to_str().expect("utf8")], config.parent().expect("folder"));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// A Synapse whose registration points at `port`, a scripted LLM, and a place for configs.
struct Deployment {
    synapse: Synapse,
    llm: FakeLlm,
    port: u16,
    dir: tempfile::TempDir,
}

impl Deployment {
    async fn start() -> Self {
        let port = free_port();
        let synapse = tokio::task::spawn_blocking(move || Synapse::start(&format!("http://127.0.0.1:{port}")))
            .await
            .expect("synapse");
        Self { synapse, llm: FakeLlm::start().await, port, dir: tempfile::tempdir().expect("tempdir") }
    }

    /// A deployment folder `name` with a copy of Synapse's registration (edited by `reg`)
    /// and a config (edited by `toml`); returns the config's path.
    fn folder(&self, name: &str, reg: impl Fn(String) -> String, toml: impl Fn(String) -> String) -> PathBuf {
        let folder = self.dir.path().join(name);
        std::fs::create_dir_all(&folder).expect("folder");
        let registration = std::fs::read_to_string(&self.synapse.registration).expect("registration");
        std::fs::write(folder.join("registration.yaml"), reg(registration)).expect("registration copy");
        let config = format!(
            "[homeserver]\nurl = \"{}\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"registration.yaml\"\n\
             listen = \"127.0.0.1:{}\"\n[database]\nurl = \"sqlite://richbot.db\"\n[llm]\nbase_url = \"{}\"\n\
             model = \"test-model\"\napi_key = \"test-key\"\n[access]\nallow = [\"@alice:localhost\"]\n",
            self.synapse.url, self.port, self.llm.base_url
        );
        let path = folder.join("richbot.toml");
        std::fs::write(&path, toml(config)).expect("config");
        path
    }
}

fn same(s: String) -> String {
    s
}

/// Replaces the value of `key: "..."` in a registration.
fn token(reg: String, key: &str) -> String {
    reg.lines()
        .map(|l| {
            if l.starts_with(&format!("{key}:")) {
                format!("{key}: \"a_token_the_homeserver_never_saw_{key}\"")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_a_good_deployment_and_names_the_fix_for_each_usual_mistake() {
    let d = Deployment::start().await;
    let (code, out) = check(&d.folder("good", same, same));
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("ok")).count(), 7, "{out}");
    assert!(
        out.contains(
            "ok   encryption: 1 persona device, cross-signed; the homeserver sends to-device messages and key counts"
        ),
        "{out}"
    );

    let cases: Vec<(&str, PathBuf, &str)> = vec![
        (
            "the homeserver has another hs_token",
            d.folder("hs_token", |r| token(r, "hs_token"), same),
            "the homeserver has a different hs_token than the registration richbot reads",
        ),
        (
            "the homeserver was not given the registration",
            d.folder("as_token", |r| token(r, "as_token"), same),
            "the homeserver does not know this registration",
        ),
        (
            "base_url without /v1",
            d.folder("no_v1", same, |t| t.replace("/v1\"", "\"")),
            "answered 404: does llm.base_url end in /v1?",
        ),
        (
            "a registration without what encryption needs",
            d.folder(
                "no_crypto",
                |r| r.replace("org.matrix.msc3202: true\n", "").replace("io.element.msc4190: true\n", ""),
                same,
            ),
            "the registration lacks what end-to-end encryption needs",
        ),
        (
            "a model the endpoint does not offer",
            d.folder("model", same, |t| t.replace("model = \"test-model\"", "model = \"gpt-9\"")),
            "does not offer llm.model = \"gpt-9\" (it offers: test-model)",
        ),
    ];
    for (name, config, fix) in cases {
        let (code, out) = check(&config);
        assert_eq!(code, Some(1), "{name}: {out}");
        assert!(out.lines().any(|l| l.starts_with("FAIL") && l.contains(fix)), "{name}: want {fix:?} in:\n{out}");
    }
    d.llm.require_key("sk-the-real-key");
    let (_, out) = check(&d.folder("no_key", same, |t| t.replace("api_key = \"test-key\"\n", "")));
    assert!(out.contains("wants an API key and none is set: set llm.api_key"), "{out}");
    let (_, out) = check(&d.folder("wrong_key", same, same));
    assert!(out.contains("refused the API key (401)"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_then_serve_answers_a_dm_with_only_the_llm_section_edited() {
    let mut d = Deployment::start().await;
    let folder = d.dir.path().join("fresh");
    let listen = format!("127.0.0.1:{}", d.port);
    let out = richbot(
        &[
            "init",
            "--homeserver",
            &d.synapse.url,
            "--server-name",
            "localhost",
            "--listen",
            &listen,
            "--out-dir",
            "fresh",
        ],
        d.dir.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The homeserver is given the registration init wrote, and restarted.
    std::fs::copy(folder.join("registration.yaml"), &d.synapse.registration).expect("give it to Synapse");
    tokio::task::block_in_place(|| d.synapse.restart());
    let config = folder.join("richbot.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text
        .replace("base_url = \"http://127.0.0.1:8080/v1\"", &format!("base_url = \"{}\"", d.llm.base_url))
        .replace("model = \"gpt-4o-mini\"", "model = \"test-model\"\napi_key = \"test-key\"");
    std::fs::write(&config, text).expect("edit the [llm] section");
    let (code, out) = check(&config);
    assert_eq!(code, Some(0), "{out}");

    let health = format!("http://{listen}/health");
    let mut serve = crate::support::serve_binary(&config, Stdio::null(), &health).await;
    d.llm.respond_with(|_| crate::support::llm::text("Hello from a fresh install."));
    let alice = User::register(&d.synapse.url, "alice").await;
    let dm = alice.create_room(&["@richbot:localhost"], true).await;
    eventually("the persona joins", Duration::from_secs(30), || async {
        alice.joined_members(&dm).await.iter().any(|u| u == "@richbot:localhost").then_some(())
    })
    .await;
    alice.say(&dm, "hello?").await;
    let answer = eventually("the answer", Duration::from_secs(30), || async {
        alice.messages_from(&dm, "@richbot:localhost").await.into_iter().next()
    })
    .await;
    assert_eq!(answer["content"]["body"], "Hello from a fresh install.");
    serve.kill().await.expect("stop serve");
}

/// A registration for offline checks: its url at `port`, real-looking tokens.
fn offline_registration(folder: &Path, port: u16) {
    std::fs::write(
        folder.join("registration.yaml"),
        format!(
            "id: richbot\nurl: \"http://127.0.0.1:{port}\"\nas_token: as_token_long_enough_to_be_real\nhs_token: hs_token_long_enough_to_be_real\n\
             sender_localpart: richbot\nnamespaces:\n  users: [{{exclusive: true, regex: '@richbot_.*:localhost'}}]\n"
        ),
    )
    .expect("registration");
}

fn offline_config(folder: &Path, port: u16, extra: &str) -> PathBuf {
    let path = folder.join("richbot.toml");
    std::fs::write(
        &path,
        format!(
            "[homeserver]\nurl = \"http://127.0.0.1:9\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"registration.yaml\"\n\
             listen = \"127.0.0.1:{port}\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n{extra}"
        ),
    )
    .expect("config");
    path
}

#[test]
fn config_mistakes_fail_validation_with_the_key_and_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    type Make = Box<dyn Fn(&Path) -> PathBuf>;
    let cases: Vec<(&str, Make, &str)> = vec![
        (
            "server_name differs from the registration's",
            Box::new(|f: &Path| {
                let c = offline_config(f, 9009, "");
                let t = std::fs::read_to_string(&c)
                    .expect("read")
                    .replace("server_name = \"localhost\"", "server_name = \"example.org\"");
                std::fs::write(&c, t).expect("write");
                c
            }),
            "homeserver.server_name: \"example.org\" but the registration's user namespace",
        ),
        (
            "access.allow admits nobody here",
            Box::new(|f: &Path| offline_config(f, 9009, "[access]\nallow = [\"*:example.org\"]\n")),
            "access.allow: admits only *:example.org and nobody of localhost",
        ),
        (
            "listen differs from the registration's url",
            Box::new(|f: &Path| offline_config(f, 9010, "")),
            "appservice.listen: richbot listens on 127.0.0.1:9010 but the registration's url is http://127.0.0.1:9009",
        ),
        (
            "the database folder is missing",
            Box::new(|f: &Path| offline_config(f, 9009, "[database]\nurl = \"sqlite://state/richbot.db\"\n")),
            "the folder",
        ),
        (
            "placeholder tokens",
            Box::new(|f: &Path| {
                let reg = std::fs::read_to_string(f.join("registration.yaml")).expect("read");
                std::fs::write(
                    f.join("registration.yaml"),
                    reg.replace("hs_token_long_enough_to_be_real", "CHANGE_ME"),
                )
                .expect("write");
                offline_config(f, 9009, "")
            }),
            "hs_token is a placeholder",
        ),
    ];
    for (i, (name, make, fix)) in cases.into_iter().enumerate() {
        let folder = dir.path().join(i.to_string());
        std::fs::create_dir_all(&folder).expect("folder");
        offline_registration(&folder, 9009);
        let config = make(&folder);
        let (code, out) = check(&config);
        assert_eq!(code, Some(1), "{name}: {out}");
        assert!(out.contains(fix), "{name}: want {fix:?} in:\n{out}");
        if name == "the database folder is missing" {
            assert!(out.contains(&folder.join("state/richbot.db").display().to_string()), "the full path: {out}");
        }
    }
}

#[test]
fn behind_a_load_balancer_listen_need_not_be_the_registrations_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    offline_registration(dir.path(), 9009);
    let config = offline_config(dir.path(), 9010, "");
    let text = std::fs::read_to_string(&config)
        .expect("read")
        .replace("[appservice]\n", "[appservice]\nbehind_proxy = true\n");
    std::fs::write(&config, text).expect("write");
    let (_, out) = check(&config);
    assert!(!out.contains("appservice.listen"), "{out}");
    assert!(out.contains("ok   config"), "the config is valid: {out}");
}

#[test]
fn a_relative_database_lives_beside_the_config_wherever_check_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("deploy");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&folder).expect("folder");
    std::fs::create_dir_all(&elsewhere).expect("folder");
    offline_registration(&folder, 9009);
    let config = offline_config(&folder, 9009, "");
    let out = richbot(&["check", "--config", config.to_str().expect("utf8")], &elsewhere);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("ok   database: sqlite://{}", folder.join("richbot.db").display()))
    );
    assert!(folder.join("richbot.db").exists());
    assert!(!elsewhere.join("richbot.db").exists(), "no second database where check ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_serve_on_one_database_exits_naming_the_first_and_refused_tokens_are_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (port_a, port_b) = (free_port(), free_port());
    let db = dir.path().join("shared.db");
    for (folder, port) in [(&a, port_a), (&b, port_b)] {
        std::fs::create_dir_all(folder).expect("folder");
        offline_registration(folder, port);
        offline_config(folder, port, &format!("[database]\nurl = \"sqlite://{}\"\n", db.display()));
    }
    let health = format!("http://127.0.0.1:{port_a}/health");
    let mut first = crate::support::serve_binary(&a.join("richbot.toml"), Stdio::piped(), &health).await;
    let second = richbot(&["serve", "--config", b.join("richbot.toml").to_str().expect("utf8")], dir.path());
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    let pid = first.id().expect("pid").to_string();
    assert!(err.contains("locked by another richbot") && err.contains(&format!("(process {pid})")), "{err}");

    // A homeserver with another hs_token: refused, and said once with the fix.
    let client = reqwest::Client::new();
    for txn in ["1", "2", "3"] {
        let resp = client
            .put(format!("http://127.0.0.1:{port_a}/_matrix/app/v1/transactions/{txn}"))
            .bearer_auth("not_the_hs_token")
            .json(&serde_json::json!({"events": []}))
            .send()
            .await
            .expect("put");
        assert_eq!(resp.status(), 403);
    }
    first.kill().await.expect("kill");
    let mut log = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut first.stderr.take().expect("stderr"), &mut log).await.expect("log");
    assert_eq!(log.lines().filter(|l| l.contains("WARN") && l.contains("different hs_token")).count(), 1, "{log}");
    assert!(log.contains("richbot starting") && log.contains(&format!("listen=127.0.0.1:{port_a}")), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_encryption_off_an_encrypted_dm_gets_one_notice_and_the_persona_leaves() {
    let opts = crate::support::Options { extra_toml: "[encryption]\nenabled = false\n".into(), ..Default::default() };
    let env = crate::support::Env::start_with(opts).await;
    let encryption = serde_json::json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
    let room = env
        .alice
        .create_room_with(serde_json::json!({"invite": [crate::support::BOT], "is_direct": true, "preset": "trusted_private_chat", "initial_state": [encryption]}))
        .await;
    let notice = eventually("the persona says it cannot read the room", Duration::from_secs(30), || async {
        env.alice.messages_from(&room, crate::support::BOT).await.into_iter().next()
    })
    .await;
    assert_eq!(notice["content"]["msgtype"], "m.notice");
    assert!(notice["content"]["body"].as_str().is_some_and(|b| b.contains("can't read encrypted messages")));
    eventually("the persona leaves", Duration::from_secs(30), || async {
        (!env.alice.joined_members(&room).await.iter().any(|u| u == crate::support::BOT)).then_some(())
    })
    .await;
    assert!(env.llm.requests().is_empty(), "the model is never asked about an encrypted room");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_llm_key_is_told_to_members_as_misconfiguration_not_try_again() {
    let env = crate::support::Env::start().await;
    env.llm.require_key("sk-not-the-configured-one");
    let dm = env.dm().await;
    env.alice.say(&dm, "hello?").await;
    let turns = env.wait_turns(&dm, 1).await;
    assert!(turns[0].0.starts_with("misconfigured: "), "{}", turns[0].0);
    assert!(turns[0].0.contains("refused the API key"), "the admin's fix is recorded: {}", turns[0].0);
    let said = env.alice.messages_from(&dm, crate::support::BOT).await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["content"]["msgtype"], "m.notice");
    let body = said[0]["content"]["body"].as_str().unwrap_or_default();
    assert!(body.contains("misconfigured") && !body.contains("try again in a little while"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_are_bounded_and_a_flood_of_malformed_events_is_one_log_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    offline_registration(dir.path(), port);
    let config = offline_config(dir.path(), port, "");
    let text = std::fs::read_to_string(&config).expect("read");
    let text = text.replace("listen = ", "max_concurrent_transactions = 1\nlisten = ");
    std::fs::write(&config, text).expect("write");
    let base = format!("http://127.0.0.1:{port}");
    let mut serve = crate::support::serve_binary(&config, Stdio::piped(), &format!("{base}/health")).await;
    let client = reqwest::Client::new();
    let put = |txn: String, n: usize| {
        let events: Vec<serde_json::Value> =
            (0..n).map(|i| serde_json::json!({"not": "an event", "i": i, "pad": "x".repeat(100)})).collect();
        client
            .put(format!("{base}/_matrix/app/v1/transactions/{txn}"))
            .bearer_auth("hs_token_long_enough_to_be_real")
            .json(&serde_json::json!({"events": events}))
            .send()
    };
    assert_eq!(put("flood".into(), 10_000).await.expect("put").status(), 200);
    assert_eq!(put("too-many".into(), 10_001).await.expect("put").status(), 413);
    // One at a time: a transaction whose body is still coming holds the one permit, so
    // the others are told to come back, and each reads that answer whole (its upload is
    // read first, not cut off with a reset connection). Which of the held one and a probe
    // took the permit first is told by the probe's answer: until it is the probe that is
    // told to come back, the held one is finished and tried again.
    let body = serde_json::json!({"events": [{"not": "an event"}]}).to_string();
    let (first, rest) = body.as_bytes().split_at(body.len() / 2);
    let mut tries = 0;
    let mut held = loop {
        tries += 1;
        assert!(tries < 50, "a probe never found the permit held");
        let mut held = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let head = format!(
            "PUT /_matrix/app/v1/transactions/held-{tries} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \
             hs_token_long_enough_to_be_real\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        held.write_all(head.as_bytes()).await.expect("write");
        held.write_all(first).await.expect("write");
        if put(format!("probe-{tries}"), 1).await.expect("answer").status() == 503 {
            break held;
        }
        held.write_all(rest).await.expect("write");
        let mut answer = vec![0u8; 1024];
        let _ = held.read(&mut answer).await.expect("read");
    };
    let answers = futures_join_all((0..16).map(|i| put(format!("c{i}"), 10_000))).await;
    let statuses: Vec<u16> =
        answers.iter().map(|r| r.as_ref().expect("an answer, not a reset").status().as_u16()).collect();
    assert_eq!(statuses, [503; 16], "all over the limit");
    for busy in answers.iter().flatten() {
        assert_eq!(busy.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    }
    held.write_all(rest).await.expect("write");
    let mut answer = vec![0u8; 1024];
    let n = held.read(&mut answer).await.expect("read");
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "the held one is stored: {}",
        String::from_utf8_lossy(&answer[..n])
    );

    serve.kill().await.expect("kill");
    let mut log = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut serve.stderr.take().expect("stderr"), &mut log).await.expect("log");
    let flood_lines = log.lines().filter(|l| l.contains("malformed") && l.contains("txn_id=\"flood\"")).count();
    assert_eq!(flood_lines, 1, "one line for 10,000 malformed events:\n{log}");
}

/// All the futures' outputs, in order (the futures run at once).
async fn futures_join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = futures.map(Box::pin).collect();
    let mut out = Vec::new();
    let mut pending: Vec<_> = handles.into_iter().map(Some).collect();
    let mut results: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        results[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
    out.extend(results.into_iter().flatten());
    out
}

#[test]
fn the_default_access_admits_members_but_not_guests_or_other_appservices_users() {
    let dir = tempfile::tempdir().expect("tempdir");
    offline_registration(dir.path(), 9009);
    std::fs::write(
        dir.path().join("bridge.yaml"),
        "id: bridge\nurl: \"http://127.0.0.1:29318\"\nas_token: bridge_as_token_long_enough\nhs_token: bridge_hs_token_long_enough\n\
         sender_localpart: bridgebot\nnamespaces:\n  users: [{exclusive: true, regex: '@whatsapp_.*:localhost'}]\n",
    )
    .expect("bridge registration");
    let config = offline_config(
        dir.path(),
        9009,
        "[access]\ndeny = [\"@mallory:localhost\"]\nother_registrations = [\"bridge.yaml\"]\n",
    );
    let settings = richbot::config::load(&config, std::iter::empty()).expect("valid");
    for (user, admitted) in [
        ("@alice:localhost", true),
        ("@12345:localhost", false),
        ("@whatsapp_4915550:localhost", false),
        ("@mallory:localhost", false),
        ("@eve:elsewhere.org", false),
    ] {
        assert_eq!(settings.allowed(user), admitted, "{user}");
    }
    let missing = offline_config(dir.path(), 9009, "[access]\nother_registrations = [\"gone.yaml\"]\n");
    let e = richbot::config::load(&missing, std::iter::empty()).expect_err("unreadable").to_string();
    assert!(e.contains("access.other_registrations[0]: cannot read"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_warns_once_with_the_fix_when_the_homeserver_cannot_reach_it() {
    let mut env = crate::support::Env::start().await;
    env.bot.stop().await;
    // richbot listens elsewhere than the url the homeserver was given (as behind a
    // load balancer that is down): the start-up ping fails.
    let port = free_port();
    let text = std::fs::read_to_string(&env.config_path).expect("config");
    let text = text
        .replace(&format!("listen = \"{}\"", env.bot_addr), &format!("listen = \"127.0.0.1:{port}\""))
        .replace("behind_proxy = false", "behind_proxy = true");
    let moved = env.dir.path().join("moved.toml");
    std::fs::write(&moved, text).expect("write");
    let health = format!("http://127.0.0.1:{port}/health");
    let mut serve = crate::support::serve_binary(&moved, Stdio::piped(), &health).await;
    let stderr = serve.stderr.take().expect("stderr");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let warned = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("WARN") && line.contains("could not reach richbot at start") {
                return line;
            }
        }
        String::new()
    })
    .await
    .expect("the warning, within a minute");
    assert!(warned.contains("make that url reach it from the homeserver"), "{warned}");
    serve.kill().await.expect("kill");
    env.start_bot_again().await;
}
