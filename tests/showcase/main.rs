//! A developer tool, not a test: shows richbot's messages in a real Matrix client and
//! takes screenshots of them. It brings up the test suite's Synapse (serving media to
//! clients that only know the unauthenticated endpoints, as nheko 0.11 does), richbot and
//! the scripted model; logs nheko (Debian's package, under Xvfb) in as Alice; then asks
//! for one message of each block type (the examples of `tests/golden/blocks.json`, each
//! with a one-sentence fallback, pictures and files given as `data:` URLs, and a poll) in
//! a clear DM and then in an encrypted one, screenshotting nheko after each answer. Then
//! (unless `SHOWCASE_ONLY` leaves out `voice`) Alice asks by voice message, and the
//! persona, with `voice_replies`, answers in text and aloud (real speech: Whisper base
//! and espeak-ng behind the OpenAI audio API, as the tests run them).
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

/// What the persona answers a voice message (espeak-ng says its last words clearly).
const VOICE_ANSWER: &str = "The weather in Lisbon is sunny and warm today.";

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
    let mut extra_toml = "[limits]\nturns_per_room_per_minute = 100\nturns_per_user_per_minute = 100\n".to_owned();
    let voice = only.as_ref().is_none_or(|o| o.iter().any(|k| k == "voice"));
    let speech = match voice {
        true => Some(support::speech::SpeechServer::start(&out.join("speech.log")).await),
        false => None,
    };
    let mut options = support::Options::default();
    if let Some(speech) = &speech {
        extra_toml.push_str(&format!(
            "[transcription]\nbase_url = \"{0}\"\n[speech]\nbase_url = \"{0}\"\n\
             [[personas]]\nlocalpart = \"richbot\"\ndisplay_name = \"Richbot\"\nvoice_replies = true\n",
            speech.base_url
        ));
        options.personas = vec![("rb_helper", "Helper")];
    }
    let env = Env::start_with(support::Options { extra_toml, ..options }).await;
    let answers = samples.clone();
    env.llm.respond_with(move |request| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        if last["role"] != "user" {
            return text("[no reply]");
        }
        let said = last["content"].as_str().unwrap_or_default();
        if said.contains("[voice message, ") {
            return text(VOICE_ANSWER);
        }
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
    let clip = voice.then(|| support::speech::spoken("What is the weather in Lisbon right now?", env.dir.path()));
    if let Some(clip) = &clip {
        let url = env.alice.upload(clip.clone(), "audio/ogg", "Voice message.ogg").await;
        env.alice.send(&room, "m.room.message", support::speech::voice_content(Some(&url), clip.len(), 2900)).await;
        env.wait_turns(&room, samples.len() + 1).await;
        client.settle().await;
        client.shot("clear-voice");
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
    if let Some(clip) = &clip {
        let extra = support::speech::voice_content(None, clip.len(), 2900);
        alice
            .send_file_with(
                &secret,
                "m.audio",
                (clip.as_slice(), "audio/ogg", "Voice message.ogg"),
                "Voice message.ogg",
                extra,
            )
            .await;
        env.wait_turns(&secret, samples.len() + 1).await;
        client.settle().await;
        client.shot("encrypted-voice");
    }
    alice.stop().await;
    client.stop();
    eprintln!("showcase: screenshots in {}", out.display());
}
