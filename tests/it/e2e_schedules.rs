//! Schedules end to end against the real Synapse: a one-off message posted once at its
//! time (with a second instance racing for it, on PostgreSQL), and after a kill -9 that
//! spanned its time; bad schedules refused at their path; occurrences missed while richbot
//! was down fired once marked late, or skipped when too old, and a leaver's schedule
//! stopped; a prompt that runs a turn (and its MCP call) at its time, in the asker's zone;
//! a recurrence that fires until `!unschedule`; and a schedule in an encrypted room.
//!
//! Each waits for its schedule's real time (a few seconds to half a minute): the times are
//! the homeserver's and the database's, not a clock the test could move.

use std::time::Duration;

use richbot::clock::{now_ms, rfc3339};
use richbot::store::{NewScheduleRow, Store};
use richbot::strings;
use serde_json::{Value, json};

use crate::support::e2ee::from;
use crate::support::llm::{Step, text};
use crate::support::mcp::{log_lines, stdio_toml};
use crate::support::{BOT, Bot, Env, Options, eventually, notices, room_id, user_id};

/// A schedule's time, `after` ms from when the model's call names it (on a loaded machine
/// the test may take seconds to get there), kept for the test to read.
#[derive(Clone, Default)]
struct Due(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl Due {
    /// The time: set by the first call, on the second.
    fn at(&self, after: i64) -> i64 {
        use std::sync::atomic::Ordering::SeqCst;
        let at = (now_ms() + after) / 1000 * 1000;
        match self.0.compare_exchange(0, at, SeqCst, SeqCst) {
            Ok(_) => at,
            Err(set) => set,
        }
    }

    fn get(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn calls(list: &[(&str, Value)]) -> Step {
    Step::Calls(list.iter().map(|(n, a)| ((*n).to_owned(), a.to_string())).collect())
}

/// The newest message's text, if it is a member's (not a tool result).
fn asked(request: &Value) -> String {
    let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    if last["role"] == "user" { last["content"].as_str().unwrap_or_default().to_owned() } else { String::new() }
}

/// The tool results of the latest request that had any in its last round: in a DM a
/// `[no reply]` after them is asked about once more, in a request of its own.
fn last_results(requests: &[Value]) -> Vec<Value> {
    requests.iter().rev().map(results).find(|r| !r.is_empty()).unwrap_or_default()
}

/// The tool results of a request's last round, parsed.
fn results(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_assistant = messages.iter().rposition(|m| m["role"] == "assistant").unwrap_or(0);
    messages[last_assistant..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok())
        .collect()
}

/// The persona's messages in `room` that say `body`.
async fn said(env: &Env, room: &str, body: &str) -> Vec<Value> {
    let ours = env.alice.messages_from(room, BOT).await;
    ours.into_iter().filter(|m| m["content"]["body"] == body).collect()
}

/// A schedule made straight in the store, as a turn would make it.
async fn insert(store: &Store, room: &str, asker: &str, when: (Option<i64>, Option<&str>, i64), text: &str) -> i64 {
    let (at_ms, rrule, next_at) = when;
    let body = json!({"text": text}).to_string();
    let origin = format!("test:{room}:{text}");
    let row = NewScheduleRow {
        origin: &origin,
        room_id: &room_id(room),
        persona: &user_id(BOT),
        asker: &user_id(asker),
        title: None,
        kind: "message",
        body: &body,
        at_ms,
        rrule,
        tz: "UTC",
        start_ms: rrule.map(|_| next_at),
        next_at,
        created_at: now_ms(),
        client: None,
    };
    store.create_schedule(&row, 20, 50).await.expect("store").expect("within bounds")
}

async fn state(store: &Store, id: i64) -> String {
    store.schedule(id).await.expect("store").expect("a schedule").state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_off_message_is_posted_once_at_its_time_and_bad_schedules_are_refused_at_their_path() {
    let env = Env::start().await;
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.bob.join(&room).await;
    env.wait_joined(&room, BOT).await;
    // A room Alice is not in, and a schedule of Bob's she may not cancel.
    let bobs = env.bob.create_room(&[BOT], false).await;
    env.wait_joined_seen_by(&env.bob, &bobs, BOT).await;
    // Bob's is made by the model, as Alice's are.
    env.llm.respond_with(|request| match asked(request).contains("remind me in an hour") {
        true => calls(&[("schedule", json!({"at": rfc3339(now_ms() + 3_600_000), "message": "Bob's"}))]),
        false => text("[no reply]"),
    });
    env.bob.say(&bobs, "remind me in an hour").await;
    env.wait_turns(&bobs, 1).await;
    let made = last_results(&env.llm.requests());
    let bobs_id = made[0]["id"].as_i64().unwrap_or_else(|| panic!("Bob's schedule: {made:#?}"));
    let store = env.store().await;
    let due = Due::default();
    let when = due.clone();
    env.llm.respond_with(move |request| {
        if !asked(request).contains("remind us") {
            return text("[no reply]");
        }
        let (at, past) = (when.at(20_000), rfc3339(now_ms() - 60_000));
        calls(&[
            ("schedule", json!({"at": rfc3339(at), "message": "Stand-up time!", "title": "Stand-up"})),
            ("schedule", json!({"every": "FREQ=DAILY;BYHOUR=9", "tz": "Mars/Olympus", "message": "x"})),
            ("schedule", json!({"every": "FREQ=SECONDLY;INTERVAL=10", "message": "x"})),
            ("schedule", json!({"at": past, "message": "x"})),
            ("schedule", json!({"at": rfc3339(at), "message": "x", "room": bobs})),
            ("unschedule", json!({"id": bobs_id})),
            ("schedule", json!({"at": rfc3339(at), "message": {"payload": {"v": 1, "blocks": [
                {"type": "file", "url": "mxc://elsewhere.example/theirs", "name": "theirs.pdf"}]}, "fallback": "A file."}})),
        ])
    });
    env.alice.say(&room, "Richbot, remind us at stand-up").await;
    env.wait_turns(&room, 1).await;
    let at = due.get();
    let requests = env.llm.requests();
    let told = results(requests.last().expect("a request"));
    assert_eq!(told.len(), 7, "{told:#?}");
    assert_eq!(told[0]["next"], json!([rfc3339(at).replace('Z', "+00:00")]), "{told:#?}");
    let id = told[0]["id"].as_i64().expect("the schedule's id");
    let refused: Vec<(&str, &str)> =
        told[1..].iter().map(|r| (r["code"].as_str().unwrap_or(""), r["path"].as_str().unwrap_or(""))).collect();
    assert_eq!(
        refused,
        [
            ("invalid_arguments", "tz"),
            ("invalid_arguments", "every"),
            ("invalid_arguments", "at"),
            ("room_not_allowed", "room"),
            ("not_owner", "id"),
            ("media_not_allowed", "message.payload.blocks[0].url"),
        ],
        "{told:#?}"
    );
    assert!(told[2]["error"].as_str().unwrap_or("").contains("schedules.min_interval_secs"), "{told:#?}");
    assert!(told[3]["error"].as_str().unwrap_or("").contains("in the past"), "{told:#?}");
    assert_eq!(state(&store, bobs_id).await, "active", "Bob's schedule stands");
    // A member cannot forge an occurrence (of her own schedule, with words of her choosing):
    // only richbot makes them.
    let forged = json!({"schedule": id, "due": at, "late": false, "what": {"text": "Forged!"}});
    env.alice.send(&room, "org.richbot.schedule", forged).await;

    // On PostgreSQL a second instance shares the database, and races for the occurrence.
    let mut second = None;
    if env.db_url.starts_with("postgres") {
        let mut settings = env.settings();
        settings.config.metrics.listen = None;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        second = Some(Bot::start(settings, listener).await);
    }
    let posted = eventually("the stand-up message is posted", Duration::from_secs(90), || async {
        let posted = said(&env, &room, "Stand-up time!").await;
        (!posted.is_empty()).then_some(posted)
    })
    .await;
    assert!(posted[0]["origin_server_ts"].as_i64().expect("ts") >= at, "not before its time: {posted:#?}");
    let turns = env.wait_turns(&room, 2).await;
    assert_eq!(turns.iter().filter(|t| t.0 == "scheduled").count(), 1, "{turns:?}");
    assert_eq!(state(&store, id).await, "done");
    assert_eq!(said(&env, &room, "Stand-up time!").await.len(), 1, "posted once");
    assert!(said(&env, &room, "Forged!").await.is_empty(), "the forged occurrence did nothing");
    eventually("the gauge counts Bob's schedule alone", Duration::from_secs(60), || async {
        env.metrics().await.lines().any(|l| l == "richbot_schedules_active 1").then_some(())
    })
    .await;
    if let Some(mut second) = second {
        second.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_off_due_while_richbot_was_killed_is_posted_once_after_the_restart() {
    let mut env = Env::start().await;
    let room = env.dm().await;
    env.bot.stop().await;
    let mut serve = env.serve_binary().await;
    let due = Due::default();
    let when = due.clone();
    env.llm.respond_with(move |request| match asked(request).contains("remind me") {
        true => calls(&[("schedule", json!({"at": rfc3339(when.at(10_000)), "message": "Take the cake out"}))]),
        false => text("[no reply]"),
    });
    env.alice.say(&room, "remind me about the cake").await;
    env.wait_turns(&room, 1).await;
    let at = due.get();
    serve.start_kill().expect("SIGKILL");
    let _ = serve.wait().await;
    // Down over its time.
    eventually("its time passes while richbot is down", Duration::from_secs(30), || async {
        (now_ms() > at + 2_000).then_some(())
    })
    .await;
    assert!(said(&env, &room, "Take the cake out").await.is_empty());
    let mut serve = env.serve_binary().await;
    eventually("the missed message is posted", Duration::from_secs(60), || async {
        (!said(&env, &room, "Take the cake out").await.is_empty()).then_some(())
    })
    .await;
    let turns = env.wait_turns(&room, 2).await;
    assert_eq!(turns.iter().filter(|t| t.0 == "scheduled").count(), 1, "{turns:?}");
    assert_eq!(said(&env, &room, "Take the cake out").await.len(), 1, "posted once");
    // A few seconds late is not late: no note before it.
    assert!(notices(&env.alice.messages_from(&room, BOT).await).iter().all(|n| !n.contains("Late")));
    serve.start_kill().expect("kill");
    let _ = serve.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occurrences_missed_while_down_fire_once_marked_late_or_are_skipped_and_a_leavers_schedule_stops() {
    let mut env = Env::start().await;
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.bob.join(&room).await;
    env.wait_joined(&room, BOT).await;
    let store = env.store().await;
    env.bob.leave(&room).await;
    eventually("richbot saw Bob leave", Duration::from_secs(60), || async {
        let members = store.joined_members(&room_id(&room)).await.expect("members");
        (!members.contains(&user_id("@bob:localhost"))).then_some(())
    })
    .await;
    env.bot.stop().await;
    let now = now_ms();
    let bobs =
        insert(&store, &room, "@bob:localhost", (Some(now - 300_000), None, now - 300_000), "Bob's reminder").await;
    let late =
        insert(&store, &room, "@alice:localhost", (Some(now - 600_000), None, now - 600_000), "Water the plants").await;
    let old =
        insert(&store, &room, "@alice:localhost", (Some(now - 7_200_000), None, now - 7_200_000), "Too old").await;
    let start = now - 3 * 3_600_000;
    let rule = (None, Some("FREQ=MINUTELY;COUNT=20"), start);
    let minutely = insert(&store, &room, "@alice:localhost", rule, "Every minute, long ago").await;
    env.start_bot_again().await;

    let posted = eventually("the late message is posted", Duration::from_secs(60), || async {
        let ours = env.alice.messages_from(&room, BOT).await;
        ours.iter().any(|m| m["content"]["body"] == "Water the plants").then_some(ours)
    })
    .await;
    let bodies: Vec<&str> = posted.iter().filter_map(|m| m["content"]["body"].as_str()).collect();
    let note = bodies.iter().position(|b| b.starts_with("⏰ Late: this was due")).expect("a late note");
    assert_eq!(bodies.get(note + 1), Some(&"Water the plants"), "the note, then the message: {bodies:?}");
    assert_eq!(posted[note]["content"]["msgtype"], "m.notice");
    for id in [old, minutely, late] {
        eventually("the ticker settled it", Duration::from_secs(60), || async {
            (state(&store, id).await == "done").then_some(())
        })
        .await;
    }
    eventually("Bob's schedule stopped", Duration::from_secs(60), || async {
        (state(&store, bobs).await == "stopped").then_some(())
    })
    .await;
    let metrics = env.metrics().await;
    for line in [
        "richbot_schedules_fired_total 2",
        "richbot_schedules_late_total 2",
        "richbot_schedules_skipped_total 21",
        "richbot_schedules_stopped_total 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    let bodies: Vec<String> = env
        .alice
        .messages_from(&room, BOT)
        .await
        .iter()
        .filter_map(|m| m["content"]["body"].as_str().map(str::to_owned))
        .collect();
    for never in ["Too old", "Every minute, long ago", "Bob's reminder"] {
        assert!(!bodies.iter().any(|b| b == never), "{never}: {bodies:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_runs_a_turn_with_its_mcp_call_at_its_time_in_the_askers_zone() {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("mcp.log");
    let env = Env::start_with(Options { extra_toml: stdio_toml("t", &log, &[], ""), ..Default::default() }).await;
    let room = env.dm().await;
    let due = Due::default();
    let when = due.clone();
    env.llm.respond_with(move |request| {
        let said = asked(request);
        // The scheduled turn's note quotes the question that made it: matched first.
        if said.contains("[scheduled request #") {
            return calls(&[("t__echo", json!({"text": "deploy green"}))]);
        }
        if said.contains("check the deploy in") {
            let at = rfc3339(when.at(10_000));
            return calls(&[("schedule", json!({"at": at, "prompt": "Check the deploy and tell me."}))]);
        }
        let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        if last["role"] == "tool" && last["content"].as_str().unwrap_or("").contains("deploy green") {
            return text("The deploy is green.");
        }
        text("[no reply]")
    });
    env.alice.say(&room, "!timezone America/New_York").await;
    let answer = eventually("the zone is set", Duration::from_secs(60), || async {
        notices(&env.alice.messages_from(&room, BOT).await).into_iter().find(|n| n.contains("America/New_York"))
    })
    .await;
    assert!(answer.starts_with("From now on I write your times in America/New_York"), "{answer}");
    env.alice.say(&room, "check the deploy in 15 seconds and tell me").await;
    env.wait_turns(&room, 2).await;
    let requests = env.llm.requests();
    let made = last_results(&requests);
    assert_eq!(made[0]["tz"], "America/New_York", "{made:#?}");
    assert!(made[0]["next"][0].as_str().unwrap_or("").ends_with("-05:00"), "{made:#?}");
    assert!(asked(&requests[0]).contains(" in America/New_York (their time zone"), "{}", asked(&requests[0]));
    assert!(log_lines(&log).iter().all(|l| !l.starts_with("ran echo")), "nothing runs at scheduling time");

    let answer = eventually("the scheduled turn answers", Duration::from_secs(90), || async {
        env.alice.messages_from(&room, BOT).await.into_iter().find(|m| m["content"]["body"] == "The deploy is green.")
    })
    .await;
    assert!(answer["origin_server_ts"].as_i64().expect("ts") >= due.get());
    let ran: Vec<String> = log_lines(&log).into_iter().filter(|l| l.starts_with("ran echo")).collect();
    assert_eq!(ran.len(), 1, "the MCP call was made at its time: {ran:?}");
    let fired = env.llm.requests().into_iter().find(|r| asked(r).contains("[scheduled request #")).expect("asked");
    let trigger = asked(&fired);
    assert!(trigger.starts_with("[Now: ") && trigger.ends_with("Check the deploy and tell me."), "{trigger}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurrence_fires_until_it_is_unscheduled_and_the_commands_list_it() {
    let opts = Options { extra_toml: "[schedules]\nmin_interval_secs = 5\n".to_owned(), ..Default::default() };
    let env = Env::start_with(opts).await;
    let room = env.dm().await;
    env.llm.respond_with(|request| match asked(request).contains("every ten seconds") {
        true => {
            calls(&[("schedule", json!({"every": "FREQ=SECONDLY;INTERVAL=10", "message": "tick", "title": "Ticker"}))])
        }
        false => text("[no reply]"),
    });
    env.alice.say(&room, "say tick every ten seconds").await;
    eventually("it fires twice", Duration::from_secs(60), || async {
        (said(&env, &room, "tick").await.len() >= 2).then_some(())
    })
    .await;
    env.alice.say(&room, "!schedules").await;
    let listed = eventually("!schedules answers", Duration::from_secs(60), || async {
        notices(&env.alice.messages_from(&room, BOT).await).into_iter().find(|n| n.starts_with("Your schedules"))
    })
    .await;
    assert!(listed.contains("#1 \"Ticker\" every FREQ=SECONDLY;INTERVAL=10"), "{listed}");
    env.alice.say(&room, "!unschedule 1").await;
    eventually("!unschedule answers", Duration::from_secs(60), || async {
        notices(&env.alice.messages_from(&room, BOT).await).into_iter().find(|n| n == "Cancelled schedule #1.")
    })
    .await;
    // Whatever fired before the answer was posted before it (one room, one turn at a time).
    let ticks = said(&env, &room, "tick").await.len();
    let cancelled = now_ms();
    eventually("two of its periods pass", Duration::from_secs(30), || async {
        (now_ms() > cancelled + 21_000).then_some(())
    })
    .await;
    assert_eq!(said(&env, &room, "tick").await.len(), ticks, "no tick after it was unscheduled");
    env.alice.say(&room, "!unschedule 1").await;
    eventually("a second !unschedule says so", Duration::from_secs(60), || async {
        notices(&env.alice.messages_from(&room, BOT).await)
            .into_iter()
            .find(|n| n.starts_with("#1 is not an active schedule"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_in_an_encrypted_room_fires_encrypted() {
    let env = Env::start().await;
    crate::e2e_encrypted::devices_ready(&env).await;
    let (mut alice, room) = crate::e2e_encrypted::encrypted_dm(&env).await;
    let due = Due::default();
    let when = due.clone();
    env.llm.respond_with(move |request| match asked(request).contains("remind me") {
        true => calls(&[("schedule", json!({"at": rfc3339(when.at(5_000)), "message": "Your encrypted reminder"}))]),
        false => text("[no reply]"),
    });
    alice.say(&room, "remind me in a moment").await;
    let events = alice.wait_messages(&room, BOT, 1).await;
    let ours = from(&events, BOT);
    assert_eq!(ours.len(), 1, "{events:#?}");
    assert_eq!(ours[0]["wire_type"], "m.room.encrypted", "it went out encrypted");
    assert_eq!(ours[0]["content"]["body"], "Your encrypted reminder");
    let raw = env.alice.messages(&room).await;
    let sent = raw.iter().find(|e| e["event_id"] == ours[0]["event_id"]).expect("the homeserver has it");
    assert!(sent["origin_server_ts"].as_i64().unwrap_or(0) >= due.get(), "not before its time: {sent:#?}");
    alice.stop().await;
}

/// Schedules that cannot be posted stop, and their asker is told in their DM: one whose
/// rich message shows media not posted where its asker is (made before that was checked
/// when a schedule is made) stops when it comes due; one whose posts keep failing (the
/// persona may not post in the room any more) stops after three in a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_that_cannot_be_posted_stop_and_their_asker_is_told_in_their_dm() {
    let mut env = Env::start().await;
    let dm = env.dm().await;
    // A group room (three members: a room of two is a DM to richbot).
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.bob.join(&room).await;
    env.wait_joined(&room, BOT).await;
    // Only Alice may post in the room from now on.
    let path = format!("/_matrix/client/v3/rooms/{}/state/m.room.power_levels/", crate::support::enc(&room));
    let (status, mut levels) = env.alice.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status, 200, "{levels}");
    levels["events_default"] = json!(50);
    let (status, _) = env.alice.call(reqwest::Method::PUT, &path, Some(levels)).await;
    assert_eq!(status, 200);
    let store = env.store().await;
    env.bot.stop().await;
    let now = now_ms();
    let failing =
        insert(&store, &room, "@alice:localhost", (None, Some("FREQ=SECONDLY;INTERVAL=3"), now), "Muted").await;
    let foreign =
        json!({"v": 1, "blocks": [{"type": "file", "url": "mxc://elsewhere.example/theirs", "name": "x.pdf"}]});
    let body = json!({"payload": foreign, "fallback": "Their file."}).to_string();
    let origin = format!("test:{dm}:foreign");
    let row = NewScheduleRow {
        origin: &origin,
        room_id: &room_id(&dm),
        persona: &user_id(BOT),
        asker: &user_id("@alice:localhost"),
        title: Some("Report"),
        kind: "message",
        body: &body,
        at_ms: Some(now),
        rrule: None,
        tz: "UTC",
        start_ms: None,
        next_at: now,
        created_at: now,
        client: None,
    };
    let media = store.create_schedule(&row, 20, 50).await.expect("store").expect("within bounds");
    env.start_bot_again().await;

    let told = eventually("both stops are told", Duration::from_secs(90), || async {
        let told = notices(&env.alice.messages_from(&dm, BOT).await);
        (told.len() >= 2).then_some(told)
    })
    .await;
    assert!(told.contains(&strings::schedule_stopped_media(media, Some("Report"))), "{told:#?}");
    let muted = strings::schedule_stopped_failing(failing, None, &room_id(&room), 3);
    assert!(told.contains(&muted), "{told:#?}");
    assert_eq!(told.len(), 2, "each told once: {told:#?}");
    assert_eq!((state(&store, media).await, state(&store, failing).await), ("stopped".into(), "stopped".into()));
    let turns = env.wait_turns(&room, 3).await;
    assert_eq!(turns.len(), 3, "three occurrences tried, none after the stop: {turns:?}");
    assert!(said(&env, &dm, "Their file.").await.is_empty(), "the foreign file was never posted");
}
