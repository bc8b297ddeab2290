//! The appservice against a real Synapse: personas joining, invites declined, durability
//! across richbot and Synapse restarts, and `richbot check`.

use std::time::Duration;

use crate::support::{BOT, Env, HELPER, eventually, room_id};
use reqwest::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personas_join_on_invite_and_disallowed_invites_are_declined() {
    let env = Env::start().await;
    let room = env.alice.create_room(&[BOT], false).await;
    env.alice.invite(&room, HELPER).await; // not registered yet: Synapse asks us (user query)
    env.wait_joined(&room, BOT).await;
    env.wait_joined(&room, HELPER).await;

    let helper_profile =
        env.alice.call(Method::GET, &format!("/_matrix/client/v3/profile/{}", crate::support::enc(HELPER)), None).await;
    assert_eq!(helper_profile.1["displayname"], "Helper");

    let theirs = env.mallory.create_room(&[BOT], true).await;
    let mallory = env.mallory.clone();
    eventually("the invite from mallory is declined", Duration::from_secs(20), || {
        let mallory = mallory.clone();
        let theirs = theirs.clone();
        async move {
            let state = mallory
                .call(
                    Method::GET,
                    &format!(
                        "/_matrix/client/v3/rooms/{}/state/m.room.member/{}",
                        crate::support::enc(&theirs),
                        crate::support::enc(BOT)
                    ),
                    None,
                )
                .await;
            (state.1["membership"] == "leave").then_some(())
        }
    })
    .await;
    assert!(env.mallory.messages_from(&theirs, BOT).await.is_empty(), "nothing is posted to a declined room");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persona_leaves_a_room_when_it_is_the_last_member() {
    let env = Env::start().await;
    let room = env.alice.create_room(&[BOT], false).await;
    env.wait_joined(&room, BOT).await;
    env.alice.leave(&room).await;
    let store = env.store().await;
    eventually("the persona leaves the empty room", Duration::from_secs(20), || {
        let store = store.clone();
        let room = room.clone();
        async move { store.joined_members(&room_id(&room)).await.expect("members").is_empty().then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_sent_while_richbot_is_down_are_stored_once_in_order() {
    let mut env = Env::start().await;
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;

    env.bot.stop().await;
    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push(env.alice.say(&room, &format!("message {i} while down")).await);
    }
    env.start_bot_again().await;
    // A successful ping makes Synapse retry its queued transactions at once.
    let matrix = richbot::matrix::Client::new(&env.synapse.url, &env.synapse.as_token, Default::default());
    matrix.ping(crate::support::synapse::AS_ID, "after-restart").await.expect("ping both ways");

    let store = env.store().await;
    let stored = eventually("all 20 messages stored", Duration::from_secs(60), || {
        let store = store.clone();
        let room = room.clone();
        let sent = sent.clone();
        async move {
            let ids: Vec<String> = store
                .room_events(&room_id(&room))
                .await
                .expect("events")
                .into_iter()
                .map(|e| e.event_id.to_string())
                .filter(|id| sent.contains(id))
                .collect();
            (ids.len() >= 20).then_some(ids)
        }
    })
    .await;
    assert_eq!(stored, sent, "each message exactly once, in order");

    // Synapse restarts its transaction ids at 1; new events must still be stored.
    let s = &mut env.synapse;
    tokio::task::block_in_place(|| s.restart());
    let after = env.alice.say(&room, "after the homeserver restarted").await;
    eventually("the event after the Synapse restart is stored", Duration::from_secs(60), || {
        let store = store.clone();
        let after = after.clone();
        async move { store.event(&ruma::OwnedEventId::try_from(after).expect("id")).await.expect("event").map(|_| ()) }
    })
    .await;
    let all = store.room_events(&room_id(&room)).await.expect("events");
    let mut ids: Vec<&str> = all.iter().map(|e| e.event_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), all.len(), "no event stored twice");
}

async fn run_check(env: &Env) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .arg("check")
        .arg("--config")
        .arg(&env.config_path)
        .output()
        .await
        .expect("run check");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_every_part_and_names_the_failing_one() {
    let mut env = Env::start().await;
    // The running serve sets the devices up; until then check says to ask again.
    crate::e2e_encrypted::devices_ready(&env).await;
    let (code, stdout) = run_check(&env).await;
    assert_eq!(code, Some(0), "{stdout}");
    for name in ["config", "database", "homeserver", "appservice ping", "encryption", "llm"] {
        assert!(stdout.lines().any(|l| l.starts_with("ok") && l.contains(&format!("{name}:"))), "{name} in:\n{stdout}");
    }

    env.bot.stop().await;
    let s = &mut env.synapse;
    tokio::task::block_in_place(|| s.stop());
    let (code, stdout) = run_check(&env).await;
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("FAIL homeserver:")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("ok") && l.contains("llm:")), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_with_a_greeting_greets_once_when_it_joins() {
    let opts = crate::support::Options {
        extra_toml: "[[personas]]\nlocalpart = \"rb_greeter\"\ndisplay_name = \"Greeter\"\ngreeting = \"Hello! Ask me **anything**.\"\n".into(),
        ..Default::default()
    };
    let env = Env::start_with(opts).await;
    let room = env.alice.create_room(&["@rb_greeter:localhost"], false).await;
    let msgs = env.wait_messages(&room, "@rb_greeter:localhost", 1).await;
    assert_eq!(msgs[0]["content"]["body"], "Hello! Ask me anything.", "plain text");
    assert_eq!(msgs[0]["content"]["formatted_body"], "<p>Hello! Ask me <strong>anything</strong>.</p>");
    assert_eq!(msgs[0]["content"]["formatted_body"], "<p>Hello! Ask me <strong>anything</strong>.</p>");
    let plain = env.alice.create_room(&[BOT], false).await;
    env.wait_joined(&plain, BOT).await;
    env.alice.say(&plain, "anyone?").await; // a DM now: a turn, answered [no reply] by the test LLM
    env.wait_turns(&plain, 1).await;
    assert!(env.alice.messages_from(&plain, BOT).await.is_empty(), "personas without a greeting say nothing on join");
    assert_eq!(env.alice.messages_from(&room, "@rb_greeter:localhost").await.len(), 1);
}

/// Synapse numbers every appservice's transactions from one sequence: beside a bridge,
/// richbot's numbers skip. The first skip after numbers one by one is asked about (a 503,
/// for a transaction Synapse may have made and not sent); Synapse answers by sending the
/// same transaction again, not a skipped one, and from then on richbot takes skips for
/// the bridge's and answers at once (each 503 had held the next answer for Synapse's
/// back-off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_another_appservice_a_skip_in_the_numbering_is_asked_about_once_then_taken_for_theirs() {
    use crate::support::bridge::ALIAS_PREFIX;
    use crate::support::llm::text;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let env = Env::start_with(crate::support::Options { bridge: true, ..Default::default() }).await;
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = answered.clone();
    env.llm.respond_with(move |_| text(&format!("Answer {} to you.", counter.fetch_add(1, Ordering::Relaxed) + 1)));
    let room = env.dm().await;
    env.alice.say(&room, "first question").await;
    env.wait_messages(&room, BOT, 1).await;
    let body = serde_json::json!({"room_alias_name": format!("{ALIAS_PREFIX}one")});
    let bridged = env.alice.create_room_with(body).await;
    for (i, question) in ["second question", "third question"].into_iter().enumerate() {
        // Events only the bridge is sent: richbot's next number skips theirs.
        env.alice.say(&bridged, &format!("to the bridge {i}")).await;
        env.alice.say(&room, question).await;
        env.wait_messages(&room, BOT, i + 2).await;
    }
    // richbot handles a transaction it answers 503 for, so the answer above does not wait
    // for Synapse's recoverer; this one would (a new transaction waits behind it), and by
    // its answer every 503 is in Synapse's log.
    env.alice.say(&room, "fourth question").await;
    env.wait_messages(&room, BOT, 4).await;
    let log = std::fs::read_to_string(env.synapse.dir.join("homeserver.log")).expect("Synapse's log");
    let answered_503: Vec<&str> =
        log.lines().filter(|l| l.contains("/_matrix/app/v1/transactions/") && l.ends_with(": 503")).collect();
    assert_eq!(answered_503.len(), 1, "one skip asked about, the next taken for the bridge's: {answered_503:#?}");
    assert_eq!(answered.load(Ordering::Relaxed), 4, "four questions, four answers");
}
