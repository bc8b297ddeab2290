//! Exactly once, shown against a real Synapse: a homeserver outage across the moment of
//! posting, a resend after Synapse forgot its transaction ids, and fault injection (the
//! real binary killed with SIGKILL at random moments, Synapse restarted mid-run), after
//! which every question has exactly one answer and nothing was posted twice.
//!
//! The fault-injection test takes about a minute: 30 kills and restarts, plus Synapse
//! restarts. Its seed is printed and can be set with `RICHBOT_FAULT_SEED`.
//!
//! Synapse restarts come only once every question asked so far has reached richbot:
//! Synapse keeps the events it has not yet put in an appservice transaction in memory and
//! loses them when it stops (element-hq/synapse#11637), so a question sent milliseconds
//! before a restart may never be pushed to any appservice. What richbot answers for
//! starts at its door.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::llm::{Step, text};
use crate::support::synapse::AS_ID;
use crate::support::{BOT, Env, Options, User, eventually, room_id};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_posted_while_the_homeserver_is_down_arrives_once_afterwards() {
    let mut env = Env::start().await;
    env.llm.respond_with(|_| Step::Delay(Duration::from_secs(2), Box::new(text("Here is the answer."))));
    let dm = env.dm().await;
    env.alice.say(&dm, "a question").await;
    eventually("the model is asked", Duration::from_secs(20), || async {
        (!env.llm.requests().is_empty()).then_some(())
    })
    .await;
    // Down across the moment of posting, for 20 s (real time: it is the homeserver's).
    tokio::task::block_in_place(|| env.synapse.stop());
    tokio::time::sleep(Duration::from_secs(20)).await;
    tokio::task::block_in_place(|| env.synapse.launch());
    let answers = eventually("the answer arrives", Duration::from_secs(60), || async {
        let m = env.alice.messages_from(&dm, BOT).await;
        (!m.is_empty()).then_some(m)
    })
    .await;
    let turns = env.wait_turns(&dm, 1).await;
    assert_eq!(turns[0].0, "answered");
    assert_eq!(env.alice.messages_from(&dm, BOT).await.len(), 1, "once: {answers:#?}");
    assert_eq!(env.llm.requests().len(), 1, "the model was asked once");
}

/// Puts the store back to "sent, but the record was not kept": a crash between the send of
/// the answer (`text`, the one turn's only reply) and its record.
async fn crashed_after_sending(env: &Env, text: &str) {
    sqlx::any::install_default_drivers();
    let db = sqlx::AnyPool::connect(&env.db_url).await.expect("db");
    // A finished turn keeps no record of its replies; a crashed one still has it.
    let reply = json!({"text": text, "tool_calls": [], "usage": {"prompt": 100, "completion": 20}}).to_string();
    for sql in [
        "UPDATE outbox SET state = 'pending', event_id = NULL",
        "DELETE FROM sent_messages",
        "UPDATE turns SET state = 'running', outcome = NULL",
        "UPDATE events SET processed = 0 WHERE turn_id IS NOT NULL",
    ] {
        sqlx::query(sql).execute(&db).await.expect(sql);
    }
    sqlx::query("INSERT INTO turn_replies (turn_id, round, reply) SELECT id, 1, $1 FROM turns")
        .bind(reply)
        .execute(&db)
        .await
        .expect("replies");
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_outcome_was_lost_is_found_by_its_marker_not_sent_again() {
    let mut env = Env::start().await;
    env.llm.respond_with(|_| text("Said exactly once."));
    let dm = env.dm().await;
    env.alice.say(&dm, "hello").await;
    env.wait_turns(&dm, 1).await;
    env.bot.stop().await;
    // Put the store back to "sent, but the record was not kept": a crash between the send
    // and its record. Then Synapse restarts, forgetting its transaction ids.
    crashed_after_sending(&env, "Said exactly once.").await;
    tokio::task::block_in_place(|| env.synapse.restart());
    env.start_bot_again().await;
    let turns = env.wait_turns(&dm, 1).await;
    assert_eq!(turns[0].0, "answered");
    assert_eq!(env.alice.messages_from(&dm, BOT).await.len(), 1, "adopted, not sent again");
    assert_eq!(env.llm.requests().len(), 1, "the recorded reply was replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_write_is_found_by_its_marker_however_busy_the_room_was_since() {
    let mut env = Env::start().await;
    env.llm.respond_with(|_| text("Said once, then buried."));
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.alice.say(&room, "Richbot, say something").await;
    env.wait_turns(&room, 1).await;
    env.bot.stop().await;
    crashed_after_sending(&env, "Said once, then buried.").await;
    // More than a page of chatter buries the answer, and Synapse forgets its txn ids.
    for i in 0..150 {
        env.bob.say(&room, &format!("chatter {i}")).await;
    }
    tokio::task::block_in_place(|| env.synapse.restart());
    env.start_bot_again().await;
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!(turns[0].0, "answered");
    assert_eq!(env.alice.messages_from(&room, BOT).await.len(), 1, "adopted, not sent again");
    assert_eq!(env.llm.requests().len(), 1, "the recorded reply was replayed");
}

/// The scripted model for fault injection: for the question `Qn` of the conversation, a
/// tracker (`rich_send`), then its edit (`rich_edit`), then the final text.
fn scripted_model(request: &Value) -> Step {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let question = messages
        .iter()
        .rev()
        .filter(|m| m["role"] == "user")
        // The question ends the newest message (its note, before it, may quote older ones).
        .find_map(|m| m["content"].as_str().and_then(|c| c.split_whitespace().rev().find(|w| w.starts_with('Q'))))
        .unwrap_or("Q?")
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_owned();
    let results: Vec<Value> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok())
        .collect();
    let step = match results.len() {
        0 => crate::support::llm::call(
            "rich_send",
            json!({"payload": {"v": 1, "blocks": [{"type": "details", "summary": format!("{question} tracking"), "body": "step 1"}]},
                   "fallback": format!("{question} tracking: step 1")}),
        ),
        1 => crate::support::llm::call(
            "rich_edit",
            json!({"event_id": results[0]["event_id"], "payload": {"v": 1, "blocks": [{"type": "details", "summary": format!("{question} tracking"), "body": "step 2"}]},
                   "fallback": format!("{question} tracking: step 2")}),
        ),
        _ => text(&format!("Answer to {question}.")),
    };
    Step::Delay(Duration::from_millis(150), Box::new(step))
}

async fn spawn_serve(env: &Env) -> tokio::process::Child {
    // The log of every run, kept beside the config for a failure to be read.
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(env.dir.path().join("serve.log")).expect("log file");
    let health = format!("http://{}/health", env.bot_addr);
    let child = crate::support::serve_binary(&env.config_path, Stdio::from(log), &health).await;
    // A ping makes Synapse retry what it queued while richbot was down, at once.
    let matrix = richbot::matrix::Client::new(&env.synapse.url, &env.synapse.as_token, Default::default());
    let _ = matrix.ping(AS_ID, "after-restart").await;
    child
}

/// Holds the asking back, once every question asked is stored by richbot (Synapse has
/// pushed it, and holds nothing of it in memory).
async fn all_received<'a>(
    env: &Env,
    asked: &'a tokio::sync::Mutex<Vec<String>>,
) -> tokio::sync::MutexGuard<'a, Vec<String>> {
    let held = asked.lock().await;
    let store = env.store().await;
    let matrix = richbot::matrix::Client::new(&env.synapse.url, &env.synapse.as_token, Default::default());
    let mut polls = 0u32;
    eventually("every question asked reaches richbot", Duration::from_secs(120), || {
        polls += 1;
        let (store, matrix, held, ping) = (&store, &matrix, &held, polls.is_multiple_of(20));
        async move {
            if ping {
                let _ = matrix.ping(AS_ID, "fault-test").await;
            }
            for id in held.iter() {
                let id = ruma::EventId::parse(id.as_str()).expect("an event id");
                store.event(&id).await.ok()??;
            }
            Some(())
        }
    })
    .await;
    store.close().await;
    held
}

/// The appservice transactions Synapse made and has not had answered (its own table), and
/// what it thinks of the appservice: a question lost on its way shows here.
async fn unsent_transactions(synapse_dir: &std::path::Path) -> String {
    let url = format!("sqlite://{}?mode=ro", synapse_dir.join("homeserver.db").display());
    let Ok(db) = sqlx::SqlitePool::connect(&url).await else { return "(Synapse's database could not be read)".into() };
    let txns: Vec<(i64, String)> = sqlx::query_as("SELECT txn_id, event_ids FROM application_services_txns")
        .fetch_all(&db)
        .await
        .unwrap_or_default();
    let state: Vec<(String, String)> =
        sqlx::query_as("SELECT as_id, state FROM application_services_state").fetch_all(&db).await.unwrap_or_default();
    format!("{txns:?}, state {state:?}")
}

/// One fault-injection run: `kills` SIGKILLs at random moments while questions flow into
/// three rooms, every `synapse_every`-th kill also restarting Synapse. Returns what it saw.
async fn fault_run(seed: u64, kills: usize, synapse_every: Option<usize>) -> String {
    let opts = Options { extra_toml: "[bot]\nedit_interval_ms = 400\n".into(), ..Default::default() };
    let mut env = Env::start_with(opts).await;
    env.llm.respond_with(scripted_model);
    let alice_dm = env.dm().await;
    let bob_dm = env.bob.create_room(&[BOT], true).await;
    env.wait_joined_seen_by(&env.bob, &bob_dm, BOT).await;
    let group = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&group, BOT).await;
    env.bob.join(&group).await;
    env.bot.stop().await;
    let mut serve = spawn_serve(&env).await;

    // Each room gets its questions one after the other, the next once the last is answered.
    let rooms: Vec<(User, String, &str)> =
        vec![(env.alice.clone(), alice_dm, ""), (env.bob.clone(), bob_dm, ""), (env.alice.clone(), group, "Richbot, ")];
    let per_room = 3;
    // Waiting like an operator would: a ping now and then cuts Synapse's retry back-off
    // toward an appservice it saw go down (richbot pings once at start, too).
    let matrix = richbot::matrix::Client::new(&env.synapse.url, &env.synapse.as_token, Default::default());
    // The questions asked so far; held while asking, and by a Synapse restart.
    let asked = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::<String>::new()));
    let driver = {
        let rooms = rooms.clone();
        let matrix = matrix.clone();
        let asked = asked.clone();
        tokio::spawn(async move {
            for n in 0..per_room {
                let mut asking = asked.lock().await;
                for (i, (user, room, prefix)) in rooms.iter().enumerate() {
                    asking.push(user.say(room, &format!("{prefix}Q{}", i * 10 + n)).await);
                }
                drop(asking);
                for (i, (user, room, _)) in rooms.iter().enumerate() {
                    let want = format!("Answer to Q{}.", i * 10 + n);
                    let mut polls = 0u32;
                    eventually(&want, Duration::from_secs(180), || {
                        polls += 1;
                        let (matrix, ping) = (&matrix, polls.is_multiple_of(20));
                        let (user, room, want) = (&user, &room, &want);
                        async move {
                            if ping {
                                let _ = matrix.ping(AS_ID, "fault-test").await;
                            }
                            let posted = user.messages_from(room, BOT).await;
                            posted.iter().any(|m| m["content"]["body"] == want.as_str()).then_some(())
                        }
                    })
                    .await;
                }
            }
        })
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for k in 0..kills {
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..1200))).await;
        let restart_synapse = synapse_every.is_some_and(|every| k % every == every - 1);
        // No question asked meanwhile, and every one asked already at richbot's door.
        let quiet = if restart_synapse { Some(all_received(&env, &asked).await) } else { None };
        serve.start_kill().expect("SIGKILL");
        let _ = serve.wait().await;
        if restart_synapse {
            tokio::task::block_in_place(|| env.synapse.restart());
        }
        drop(quiet);
        serve = spawn_serve(&env).await;
    }
    if let Err(e) = driver.await {
        let log = std::fs::read_to_string(env.dir.path().join("serve.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
        // What richbot received, per room: did the question reach it at all?
        let store = env.store().await;
        let mut seen = Vec::new();
        for (_, room, _) in &rooms {
            let events = store.room_events(&room_id(room)).await.unwrap_or_default();
            let bodies: Vec<String> = events
                .iter()
                .filter(|e| e.event_type == "m.room.message")
                .map(|e| {
                    format!(
                        "{}{}",
                        e.content()["body"].as_str().unwrap_or("?"),
                        if e.processed { "" } else { " (pending)" }
                    )
                })
                .collect();
            seen.push(format!("{room}: {}", bodies.join(" | ")));
        }
        let last: Vec<&str> = log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
        panic!(
            "not every question was answered ({e}); Synapse's unsent transactions: {}; richbot's warnings:\n{}\n\
             stored messages:\n{}\nlog tail:\n{}",
            unsent_transactions(&env.synapse.dir).await,
            tail.join("\n"),
            seen.join("\n"),
            last.join("\n")
        );
    }
    // Let the last turns finish their bookkeeping, then look.
    for (_, room, _) in &rooms {
        eventually("the room's turns are done", Duration::from_secs(60), || async {
            let store = env.store().await;
            let t = store.turn_outcomes(&room_id(room)).await.expect("turns");
            let running = store.unfinished_turn(&room_id(room)).await.expect("running").is_some();
            (t.iter().filter(|o| o.0 == "answered").count() >= per_room && !running).then_some(())
        })
        .await;
    }
    serve.start_kill().expect("stop");
    let _ = serve.wait().await;

    let mut report = Vec::new();
    for (i, (user, room, _)) in rooms.iter().enumerate() {
        let posted = user.messages_from(room, BOT).await;
        let markers: Vec<&str> = posted.iter().filter_map(|m| m["content"]["org.richbot.write"].as_str()).collect();
        let unique: HashSet<&&str> = markers.iter().collect();
        assert_eq!(unique.len(), markers.len(), "a write posted twice in room {i}: {markers:?}");
        let mut trackers: HashMap<String, String> = HashMap::new();
        for n in 0..per_room {
            let q = format!("Q{}", i * 10 + n);
            let answers = posted.iter().filter(|m| m["content"]["body"] == format!("Answer to {q}.").as_str()).count();
            assert_eq!(answers, 1, "{q} answered exactly once");
            let sends: Vec<&Value> =
                posted.iter().filter(|m| m["content"]["body"] == format!("{q} tracking: step 1").as_str()).collect();
            assert_eq!(sends.len(), 1, "{q}'s tracker posted exactly once");
            trackers.insert(q, sends[0]["event_id"].as_str().unwrap_or_default().to_owned());
        }
        let tracker_edits = posted.iter().filter(|m| {
            m["content"]["m.relates_to"]["rel_type"] == "m.replace"
                && m["content"]["m.new_content"]["body"].as_str().is_some_and(|b| b.contains("tracking"))
        });
        for edit in tracker_edits {
            let body = edit["content"]["m.new_content"]["body"].as_str().unwrap_or_default();
            let q = body.split_whitespace().next().unwrap_or_default();
            assert_eq!(
                edit["content"]["m.relates_to"]["event_id"].as_str(),
                trackers.get(q).map(String::as_str),
                "{body}"
            );
        }
        let edits = posted
            .iter()
            .filter(|m| m["content"]["m.relates_to"]["rel_type"] == "m.replace")
            .filter(|m| m["content"]["m.new_content"]["body"].as_str().is_some_and(|b| b.contains("tracking")))
            .count();
        assert_eq!(edits, per_room, "one tracker edit per question, each on its own tracker, in room {i}");
        let turns = env.store().await.turn_outcomes(&room_id(room)).await.expect("turns");
        assert_eq!(turns.iter().filter(|t| t.0 == "answered").count(), per_room, "room {i}: {turns:?}");
        report.push(format!("room {i}: {} posts, {per_room} answers, {edits} edits, 0 duplicates", posted.len()));
    }
    let log = std::fs::read_to_string(env.dir.path().join("serve.log")).unwrap_or_default();
    let asked = log.lines().filter(|l| l.contains("the homeserver skipped transactions")).count();
    format!("seed {seed}, {kills} kills, {asked} skipped transaction(s) asked for: {}", report.join("; "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_random_moments_every_question_has_exactly_one_answer() {
    let seed = std::env::var("RICHBOT_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| richbot::clock::now_ms().unsigned_abs());
    eprintln!("fault injection seed {seed} (set RICHBOT_FAULT_SEED={seed} to replay)");
    let kills_only = fault_run(seed, 20, None).await;
    eprintln!("{kills_only}");
    let with_synapse = fault_run(seed.wrapping_add(1), 10, Some(4)).await;
    eprintln!("with Synapse restarts: {with_synapse}");
}
