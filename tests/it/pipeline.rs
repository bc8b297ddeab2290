//! The pipeline with the homeserver faked (unit-level, as the style guide allows): outcomes
//! that a real Synapse will not produce on demand, such as a homeserver that refuses a
//! call after letting the persona join.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_hs::{FakeHs, Reply};

#[tokio::test]
async fn a_member_event_the_homeserver_refuses_is_recorded_done_not_retried_forever() {
    let fake = FakeHs::start(|r| {
        if r.path().ends_with("/joined_members") {
            Reply::refused(403, "M_FORBIDDEN", "You are not in this room")
        } else {
            Reply::ok(json!({}))
        }
    })
    .await;
    let hs = &fake.url;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("reg.yaml"),
        "id: r\nurl: null\nas_token: as\nhs_token: hs\nsender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@rb_.*:x'}]\n",
    )
    .expect("reg");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let db = dir.path().join("bot.db");
    let toml = format!(
        "[homeserver]\nurl = \"{hs}\"\nserver_name = \"x\"\n[appservice]\nregistration = \"reg.yaml\"\nlisten = \"{addr}\"\n\
         [database]\nurl = \"sqlite://{}\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n[access]\nallow = [\"@alice:x\"]\n",
        db.display()
    );
    let settings =
        richbot::config::from_str(&toml, "c.toml".as_ref(), dir.path(), std::iter::empty()).expect("settings");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let bot = tokio::spawn(richbot::run(settings, listener, async {
        let _ = stopped.await;
    }));

    let invite = json!({"events": [{"event_id": "$invite", "room_id": "!room:x", "sender": "@alice:x", "type": "m.room.member",
        "state_key": "@richbot:x", "origin_server_ts": 1, "content": {"membership": "invite"}}]});
    let client = reqwest::Client::new();
    let resp = client
        .put(format!("http://{addr}/_matrix/app/v1/transactions/1"))
        .bearer_auth("hs")
        .json(&invite)
        .send()
        .await
        .expect("push");
    assert_eq!(resp.status(), 200);

    let store = richbot::store::Store::open(&format!("sqlite://{}", db.display())).await.expect("store");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let done = store.event(ruma::event_id!("$invite")).await.expect("query").is_some_and(|e| e.processed);
        if done {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the refused member event was never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked: Vec<String> = fake.requests().iter().map(|r| format!("{} {}", r.method, r.path())).collect();
    assert_eq!(
        asked.iter().filter(|r| r.ends_with("/joined_members")).count(),
        1,
        "asked once, not in a loop: {asked:?}"
    );
    assert!(asked.iter().any(|r| r == "POST /_matrix/client/v3/rooms/%21room%3Ax/join"), "{asked:?}");
    let _ = stop.send(());
    bot.await.expect("join").expect("ran");
}
