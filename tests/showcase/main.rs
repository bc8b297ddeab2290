//! A developer tool, not a test: shows richbot's messages in a real Matrix client and
//! takes screenshots of them. It brings up the test suite's Synapse (serving media to
//! clients that only know the unauthenticated endpoints, as nheko 0.11 does), richbot and
//! the scripted model; logs nheko (Debian's package, under Xvfb) in as Alice; then asks
//! for one message of each block type (the examples of `tests/golden/blocks.json`, each
//! with a one-sentence fallback, pictures and files given as `data:` URLs, and a poll) in
//! a clear DM and then in an encrypted one, screenshotting nheko after each answer.
//!
//! Run it with `scripts/screenshots.sh [OUT]` (which installs nheko and what it needs);
//! the PNGs land in OUT (default `target/screenshots`). `cargo test` does not build or
//! run it (`test = false` in Cargo.toml).

#[allow(dead_code)]
#[path = "../it/support/mod.rs"]
mod support;
mod nheko;
mod samples;

use std::path::PathBuf;
use std::time::Duration;

use support::llm::{Step, text};
use support::{BOT, Env, eventually};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let out = PathBuf::from(std::env::var("SHOWCASE_OUT").unwrap_or_else(|_| "target/screenshots".into()));
    std::fs::create_dir_all(&out).expect("the screenshots' folder");
    let only: Option<Vec<String>> =
        std::env::var("SHOWCASE_ONLY").ok().map(|k| k.split(',').map(str::to_owned).collect());
    let samples: Vec<(String, Step)> =
        samples::all().into_iter().filter(|(kind, _)| only.as_ref().is_none_or(|o| o.contains(kind))).collect();
    // Some twenty-five questions a minute from one member: more than a room is answered
    // by default before the persona pauses it as a loop.
    let extra_toml = "[limits]\nturns_per_room_per_minute = 100\nturns_per_user_per_minute = 100\n".to_owned();
    let env = Env::start_with(support::Options { extra_toml, ..Default::default() }).await;
    let answers = samples.clone();
    env.llm.respond_with(move |request| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        if last["role"] != "user" {
            return text("[no reply]");
        }
        let said = last["content"].as_str().unwrap_or_default();
        answers
            .iter()
            .find(|(kind, _)| said.ends_with(&format!("show {kind}")))
            .map_or_else(|| text("Ask me to show a block type."), |(_, step)| step.clone())
    });
    let room = env.dm().await;
    eprintln!("showcase: Synapse at {}, clear DM {room}", env.synapse.url);
    if std::env::var_os("SHOWCASE_PAUSE").is_some() {
        tokio::time::sleep(Duration::from_secs(1_800)).await;
    }
    let client = nheko::Nheko::start(&env.synapse.url, &out);
    client.log_in("@alice:localhost", "correct horse battery", &env.synapse.url).await;
    client.open_room(0).await;
    for (n, (kind, _)) in samples.iter().enumerate() {
        env.alice.say(&room, &format!("show {kind}")).await;
        env.wait_turns(&room, n + 1).await;
        client.settle().await;
        client.shot(&format!("clear-{:02}-{kind}", n + 1));
    }

    // The same in an encrypted DM, made by Alice's other (E2EE) client while nheko is
    // logged in, so the persona shares each room key with nheko's device too.
    let store = env.store().await;
    eventually("encryption works", Duration::from_secs(120), || async {
        let found = store.meta(richbot::crypto::PROBE_FOUND).await.ok().flatten();
        (found.as_deref() == Some("works")).then_some(())
    })
    .await;
    let mut alice = support::e2ee::E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let secret = alice.create_room(&[BOT], true).await;
    alice.wait_joined(&secret, BOT).await;
    client.settle().await;
    client.dismiss_dialog().await;
    client.open_room(0).await;
    for (n, (kind, _)) in samples.iter().enumerate() {
        alice.say(&secret, &format!("show {kind}")).await;
        env.wait_turns(&secret, n + 1).await;
        client.settle().await;
        client.shot(&format!("encrypted-{:02}-{kind}", n + 1));
    }
    alice.stop().await;
    client.stop();
    eprintln!("showcase: screenshots in {}", out.display());
}
