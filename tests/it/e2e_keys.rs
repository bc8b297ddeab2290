//! The personas' one-time keys against the real Synapse: people who start Olm sessions
//! with a persona's device claim them, the persona uploads more once fewer than half are
//! left, and the key counts Synapse repeats in every transaction are not stored again.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::e2e_encrypted::devices_ready;
use crate::support::llm::text;
use crate::support::{BOT, Env, enc, eventually};

/// The persona's device's one-time keys on the homeserver: an empty upload as that device
/// (the appservice's token) answers with its counts and changes nothing.
async fn keys_left(env: &Env, device: &str) -> u64 {
    let url = format!("{}/_matrix/client/v3/keys/upload?user_id={}&device_id={device}", env.synapse.url, enc(BOT));
    let response = reqwest::Client::new().post(url).bearer_auth(&env.synapse.as_token).json(&json!({})).send();
    let counts: Value = response.await.expect("keys/upload").json().await.expect("json");
    counts["one_time_key_counts"]["signed_curve25519"].as_u64().unwrap_or_else(|| panic!("counts: {counts}"))
}

/// The prometheus counter `name`'s value.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claimed_one_time_keys_are_replenished_and_counts_a_transaction_repeats_are_not_stored_again() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("Noted."));
    devices_ready(&env).await;
    let store = env.store().await;
    let device = store.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("kv").expect("a device");
    let uploaded = keys_left(&env, &device).await;
    assert!(uploaded >= 10, "the device has one-time keys: {uploaded}");

    // Alice's devices (as many as it takes) each claim one, as a client starting an Olm
    // session does, until a fifth are left.
    let claim = json!({"one_time_keys": {BOT: {&device: "signed_curve25519"}}});
    for _ in 0..uploaded - uploaded / 5 {
        let (status, claimed) =
            env.alice.call(Method::POST, "/_matrix/client/v3/keys/claim", Some(claim.clone())).await;
        assert_eq!(status, 200, "{claimed}");
        let keys = claimed["one_time_keys"][BOT][&device].as_object().expect("a key");
        assert!(keys.values().all(|k| k.get("fallback").is_none()), "a one-time key, not the fallback: {claimed}");
    }
    assert_eq!(keys_left(&env, &device).await, uploaded / 5);

    // The next transaction about the persona's room carries the low count.
    let room = env.dm().await;
    env.alice.say(&room, "One.").await;
    env.wait_messages(&room, BOT, 1).await;
    eventually("the persona uploads one-time keys again", Duration::from_secs(60), || async {
        (keys_left(&env, &device).await >= uploaded / 2).then_some(())
    })
    .await;

    // From then on the counts are the same in every transaction: they are given to the
    // device once, the rest counted as repeats.
    let before = counter(&env.metrics().await, "richbot_e2ee_repeated_key_counts_total");
    for (n, question) in ["Two.", "Three."].into_iter().enumerate() {
        env.alice.say(&room, question).await;
        env.wait_messages(&room, BOT, n + 2).await;
    }
    eventually("repeated counts are left out", Duration::from_secs(60), || async {
        (counter(&env.metrics().await, "richbot_e2ee_repeated_key_counts_total") > before).then_some(())
    })
    .await;
    assert!(keys_left(&env, &device).await >= uploaded / 2, "the keys stay uploaded");
}
