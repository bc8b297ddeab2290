//! The pickle key (`encryption.pickle_key_file`), on SQLite and PostgreSQL: the personas'
//! crypto secrets are sealed at rest, a store from before the key is sealed at the next
//! start (not reset), and a database whose secrets the configured key does not open is
//! refused at start with what to do.

use std::sync::Arc;
use std::time::Duration;

use richbot::pickle::PickleKey;
use richbot::store::{CryptoWrite, GroupSessionRow, OlmSessionRow, Store};

use crate::e2e_encrypted::{devices_ready, echo, encrypted_dm};
use crate::support::e2ee::from;
use crate::support::postgres::database_url;
use crate::support::{BOT, Env, Options, eventually};

const PERSONA: &str = "@richbot_bot:localhost";

fn key() -> Arc<PickleKey> {
    Arc::new(PickleKey::from_text(&PickleKey::generate_text()).expect("key"))
}

/// One of each sealed kind, and a device (which stays clear).
fn one_of_each() -> CryptoWrite {
    CryptoWrite {
        kv: vec![("account".into(), Some(r#"{"pickle":"account secret"}"#.into()))],
        olm_sessions: vec![OlmSessionRow {
            session_id: "olm".into(),
            sender_key: "curve".into(),
            value: r#"{"pickle":"olm secret"}"#.into(),
        }],
        group_sessions: vec![GroupSessionRow {
            session_id: "megolm".into(),
            room_id: "!r:localhost".into(),
            sender_key: "curve".into(),
            sender_data_type: 1,
            backed_up: false,
            value: r#"{"pickle":"room key"}"#.into(),
        }],
        outbound: vec![("!r:localhost".into(), r#"{"pickle":"outbound"}"#.into())],
        devices: vec![("@alice:localhost".into(), "DEV".into(), Some(r#"{"device":"public"}"#.into()))],
        ..Default::default()
    }
}

#[tokio::test]
async fn clear_crypto_state_is_sealed_once_then_opens_only_with_its_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = database_url(dir.path(), "t.db").await;
    let clear = Store::open(&url).await.expect("open");
    clear.crypto_write(PERSONA, &one_of_each()).await.expect("written clear");
    assert_eq!(clear.clear_crypto_values().await.expect("count"), 4, "account, olm, room key, outbound");

    let k = key();
    let keyed = clear.clone().with_pickle_key(Some(k));
    assert_eq!(keyed.seal_crypto_state().await.expect("sealed"), 4);
    assert_eq!(keyed.clear_crypto_values().await.expect("count"), 0);
    assert_eq!(keyed.seal_crypto_state().await.expect("again"), 0, "nothing left to seal");
    // Read back as they were, through every kind of read.
    assert_eq!(
        keyed.crypto_kv(PERSONA, "account").await.expect("kv").as_deref(),
        Some(r#"{"pickle":"account secret"}"#)
    );
    assert_eq!(keyed.crypto_olm_sessions(PERSONA, "curve").await.expect("olm"), [r#"{"pickle":"olm secret"}"#]);
    let room_key = keyed.crypto_group_session(PERSONA, "megolm").await.expect("group").expect("there");
    assert_eq!(room_key.1, r#"{"pickle":"room key"}"#);
    assert_eq!(keyed.crypto_group_unbacked(PERSONA, 10).await.expect("unbacked"), [r#"{"pickle":"room key"}"#]);
    assert_eq!(
        keyed.crypto_outbound(PERSONA, "!r:localhost").await.expect("out").as_deref(),
        Some(r#"{"pickle":"outbound"}"#)
    );
    // A new save is sealed as it is written.
    let w = CryptoWrite { kv: vec![("identity".into(), Some("\"cross-signing\"".into()))], ..Default::default() };
    keyed.crypto_write(PERSONA, &w).await.expect("save");
    assert_eq!(keyed.clear_crypto_values().await.expect("count"), 0);
    assert_eq!(keyed.crypto_kv(PERSONA, "identity").await.expect("kv").as_deref(), Some("\"cross-signing\""));

    // Without the key, or with another, nothing secret reads, and a start is refused.
    let no_key = clear.crypto_kv(PERSONA, "account").await.expect_err("sealed").to_string();
    assert!(no_key.contains("encryption.pickle_key_file"), "{no_key}");
    assert!(clear.seal_crypto_state().await.is_err(), "a start without the key");
    let other = clear.clone().with_pickle_key(Some(key()));
    let wrong = other.seal_crypto_state().await.expect_err("another key").to_string();
    assert!(wrong.contains("does not open with the configured pickle key"), "{wrong}");
    assert!(other.crypto_olm_sessions(PERSONA, "curve").await.is_err());
    // What is public stays readable: other people's devices, and richbot's own bookkeeping.
    let device =
        CryptoWrite { kv: vec![("richbot.device_id".into(), Some("\"RBDEVICE\"".into()))], ..Default::default() };
    keyed.crypto_write(PERSONA, &device).await.expect("save");
    assert_eq!(clear.crypto_kv(PERSONA, "richbot.device_id").await.expect("clear").as_deref(), Some("\"RBDEVICE\""));
    assert_eq!(clear.crypto_devices(PERSONA, "@alice:localhost", None).await.expect("devices").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_the_pickle_key_is_sealed_at_the_next_start_and_read_as_before() {
    let mut env = Env::start_with(Options { pickle_key: false, ..Options::default() }).await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    let (mut alice, room) = encrypted_dm(&env).await;
    alice.say(&room, "question one").await;
    alice.wait_messages(&room, BOT, 1).await;
    let before = env.store().await;
    assert!(before.clear_crypto_values().await.expect("count") > 0, "kept clear without a key");
    let device = before.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("kv").expect("a device");

    // The admin writes a key (as `richbot generate-pickle-key` does), names it, restarts.
    env.bot.stop().await;
    richbot::pickle::write_new(&env.dir.path().join("pickle.key")).expect("key file");
    let toml = std::fs::read_to_string(&env.config_path).expect("config");
    std::fs::write(&env.config_path, crate::support::with_pickle_key(&toml)).expect("config");
    env.start_bot_again().await;
    let store = env.store().await;
    eventually("the stored state is sealed at start", Duration::from_secs(60), || async {
        (store.clear_crypto_values().await.ok() == Some(0)).then_some(())
    })
    .await;
    assert_eq!(store.crypto_kv(BOT, richbot::crypto::DEVICE_ID).await.expect("kv"), Some(device), "not reset");
    alice.say(&room, "question two").await;
    let events = alice.wait_messages(&room, BOT, 2).await;
    let answers: Vec<_> = from(&events, BOT).iter().map(|e| e["content"]["body"].clone()).collect();
    assert_eq!(answers, ["Answer to: one", "Answer to: two"], "{events:#?}");

    // Without the key the start is refused, saying which setting; nothing is touched.
    env.bot.stop().await;
    let mut keyless = env.settings();
    keyless.pickle_key = None;
    let listener = tokio::net::TcpListener::bind(env.bot_addr).await.expect("rebind");
    let refused =
        tokio::time::timeout(Duration::from_secs(60), richbot::run(keyless.clone(), listener, std::future::pending()))
            .await
            .expect("refused at once")
            .expect_err("a sealed store without its key");
    assert!(refused.to_string().contains("encryption.pickle_key_file"), "{refused}");
    assert_eq!(env.store().await.clear_crypto_values().await.expect("count"), 0);

    // The key lost for good: each persona's encryption is started over without it (its
    // device id is public, kept clear), and then a start without a key is let through.
    for persona in ["richbot", "rb_helper"] {
        let done = richbot::reset::run(&keyless, persona).await.expect("reset without the key");
        assert!(done.contains("deleted"), "{done}");
    }
    let unkeyed = Store::open(&env.db_url).await.expect("open");
    assert_eq!(unkeyed.seal_crypto_state().await.expect("nothing sealed is left"), 0);
    alice.stop().await;
}
