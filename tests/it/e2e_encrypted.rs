//! Encrypted rooms end to end: real E2EE people (matrix-js-sdk with its Rust crypto, as
//! Element Web has it; `support::e2ee`) talk to the personas in rooms Element would make,
//! against the real Synapse with to-device messages and key counts on.

use std::time::Duration;

use serde_json::json;

use crate::support::e2ee::{E2ee, from};
use crate::support::llm::{call, text};
use crate::support::{BOT, Env, eventually};

/// Waits until every persona's device is set up and cross-signed.
async fn devices_ready(env: &Env) {
    let store = env.store().await;
    for persona in [BOT, crate::support::HELPER] {
        let store = store.clone();
        eventually(&format!("{persona}'s device is cross-signed"), Duration::from_secs(90), || {
            let store = store.clone();
            async move { store.crypto_kv(persona, richbot::crypto::CROSS_SIGNED).await.ok().flatten().map(|_| ()) }
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_dm_is_answered_and_the_answer_decrypts() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("It is sunny in Lisbon."));
    devices_ready(&env).await;
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let room = alice.create_room(&[BOT], true).await;
    alice.wait_joined(&room, BOT).await;
    alice.say(&room, "What's the weather in Lisbon?").await;

    let events = alice.wait_messages(&room, BOT, 1).await;
    let answers = from(&events, BOT);
    assert_eq!(answers.len(), 1, "{events:#?}");
    assert_eq!(answers[0]["wire_type"], "m.room.encrypted", "the answer went out encrypted");
    assert_eq!(answers[0]["decryption_failure"], json!(null));
    assert_eq!(answers[0]["content"]["body"], "It is sunny in Lisbon.");
    let question = env.llm.requests()[0]["messages"].as_array().expect("messages").last().expect("one").clone();
    assert!(question["content"].as_str().expect("text").ends_with("What's the weather in Lisbon?"), "{question}");
    let _ = call;
    alice.stop().await;
}
