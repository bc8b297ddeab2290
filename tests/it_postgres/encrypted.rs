//! Encrypted rooms among two `richbot serve` processes on one PostgreSQL, behind one URL
//! (a round-robin proxy, as a load balancer would be): transactions, and so the room keys
//! and questions they carry, alternate between the instances, and each persona's crypto
//! moves between them under its lease. Every answer arrives once and decrypts, in a DM
//! and in a group room, and after one instance is killed the other answers alone.

use std::time::Duration;

use serde_json::json;

use crate::e2e_encrypted::{devices_ready, echo};
use crate::instances::Instance;
use crate::support::e2ee::{E2ee, from};
use crate::support::{BOT, Env, Options, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_the_personas_crypto_and_every_answer_decrypts_once() {
    let mut env = Env::start_with(Options { extra_toml: "[bot]\nlease_secs = 6\n".into(), ..Options::default() }).await;
    env.llm.respond_with(echo);
    devices_ready(&env).await;
    env.bot.stop().await;
    let (one, addr_one) = Instance::start(&env, 1, None).await;
    let (mut two, addr_two) = Instance::start(&env, 2, None).await;
    let front = tokio::net::TcpListener::bind(env.bot_addr).await.expect("the homeserver's URL");
    let _proxy = crate::proxy::start(front, vec![addr_one, addr_two]);

    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let mut bob = E2ee::login(&env.synapse.url, "bob", env.dir.path()).await;
    let dm = alice.create_room(&[BOT], true).await;
    let group = alice.create_room(&[BOT, "@bob:localhost"], false).await;
    bob.join(&group).await;
    alice.wait_joined(&dm, BOT).await;
    alice.wait_joined(&group, BOT).await;
    alice.wait_joined(&group, "@bob:localhost").await;
    for i in 1..=4 {
        alice.say(&dm, &format!("question d{i}")).await;
        alice.wait_messages(&dm, BOT, i).await;
        bob.say(&group, &format!("Richbot, question g{i}")).await;
        bob.wait_messages(&group, BOT, i).await;
    }
    let expected = |p: &str| (1..=4).map(|i| (json!(format!("Answer to: {p}{i}")), json!(null))).collect::<Vec<_>>();
    let answers = |events: &[serde_json::Value]| {
        from(events, BOT)
            .iter()
            .map(|e| (e["content"]["body"].clone(), e["decryption_failure"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(answers(&alice.messages(&dm).await), expected("d"), "the DM's answers, each once, all decrypted");
    assert_eq!(answers(&bob.messages(&group).await), expected("g"), "the group's, as bob sees them");
    assert_eq!(answers(&alice.messages(&group).await), expected("g"), "and as alice sees them");
    assert!(
        one.counter("richbot_transactions_total ").await > 0 && two.counter("richbot_transactions_total ").await > 0
    );
    let store = env.store().await;
    let (_, generation) = store.crypto_lease(BOT).await.expect("store").expect("the persona's crypto was leased");
    assert!(generation > 1, "the persona's crypto moved between the instances (generation {generation})");

    // One instance killed: the other answers alone, decryptably.
    two.child.start_kill().expect("SIGKILL");
    let _ = two.child.wait().await;
    alice.say(&dm, "question after").await;
    let events = alice.wait_messages(&dm, BOT, 5).await;
    let last = from(&events, BOT).last().map(|e| e["content"]["body"].clone());
    assert_eq!(last, Some(json!("Answer to: after")), "{events:#?}");
    eventually("nothing left pending", Duration::from_secs(30), || async {
        store.rooms_with_pending().await.expect("pending").is_empty().then_some(())
    })
    .await;
    for client in [alice, bob] {
        client.stop().await;
    }
}
