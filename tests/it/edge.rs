//! The HTTP edge in-process (`Router::oneshot`), table-driven: auth, errors, limits, and
//! idempotent transactions against a real SQLite file.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use richbot::appservice::{AppState, router};
use richbot::inbox::Inbox;
use richbot::metrics::Metrics;
use richbot::queue::RoomQueue;
use richbot::store::Store;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "hs_token_for_the_edge_tests";
const LIMIT: usize = 4 * 1024 * 1024;

struct Edge {
    app: axum::Router,
    store: Store,
    metrics: Arc<Metrics>,
    queue: Arc<RoomQueue>,
    url: String,
    _dir: tempfile::TempDir,
}

async fn edge() -> Edge {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = crate::support::postgres::database_url(dir.path(), "edge.db").await;
    edge_on(url, dir).await
}

/// An edge on the database at `url` (another instance's, on PostgreSQL).
async fn edge_on(url: String, dir: tempfile::TempDir) -> Edge {
    // As `serve` builds it: on PostgreSQL (several instances may share it) no members in
    // memory, and the door asks the database.
    let shared = richbot::store::Backend::of(&url) == richbot::store::Backend::Postgres;
    let store = Store::open(&url).await.expect("store");
    let store = if shared { store } else { store.caching_members() };
    let registration = dir.path().join("registration.yaml");
    std::fs::write(
        &registration,
        format!("id: richbot\nurl: null\nas_token: as_token_for_the_edge_tests\nhs_token: {TOKEN}\nsender_localpart: richbot\nnamespaces:\n  users: [{{exclusive: true, regex: '@rb_.*:localhost'}}]\n"),
    )
    .expect("registration");
    let config = format!(
        "[homeserver]\nurl = \"http://127.0.0.1:9\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"{}\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        registration.display()
    );
    let settings =
        richbot::config::from_str(&config, "t.toml".as_ref(), dir.path(), std::iter::empty()).expect("settings");
    let matrix = richbot::matrix::Client::new("http://127.0.0.1:9", "as", Default::default());
    let personas = richbot::assemble::personas(&settings, matrix, store.clone());
    let metrics = Arc::new(Metrics::default());
    let queue = Arc::new(RoomQueue::new([], Vec::new()));
    let policy = richbot::assemble::room_policy(&settings);
    let inbox = Inbox::new(store.clone(), queue.clone(), personas.clone(), policy, metrics.clone());
    let inbox = if shared { inbox.sharing() } else { inbox };
    // Skipped transactions are asked for (their numbers kept in the store, both kinds).
    let state = AppState::new(TOKEN, inbox, personas).asking_for_skipped(store.clone());
    Edge { app: router(state, LIMIT), store, metrics, queue, url, _dir: dir }
}

async fn send(
    app: &axum::Router,
    method: &str,
    uri: &str,
    auth: Option<&str>,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri).header("content-type", "application/json");
    if let Some(a) = auth {
        req = req.header("authorization", format!("Bearer {a}"));
    }
    let resp = app.clone().oneshot(req.body(body.into()).expect("request")).await.expect("response");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn event(id: &str) -> Value {
    json!({"event_id": id, "room_id": "!r:localhost", "sender": "@alice:localhost", "type": "m.room.message",
           "origin_server_ts": 1, "content": {"msgtype": "m.text", "body": id}})
}

fn txn(events: Vec<Value>) -> String {
    json!({"events": events, "ephemeral": [], "de.sorunome.msc2409.to_device": []}).to_string()
}

#[tokio::test]
async fn requests_get_matrix_errors() {
    let e = edge().await;
    let put = "/_matrix/app/v1/transactions/1";
    let ok_body = txn(vec![]);
    let big = txn(vec![
        json!({"event_id": "$big", "room_id": "!r", "sender": "@a:b", "type": "x", "content": {"pad": "x".repeat(LIMIT)}}),
    ]);
    let two_mib = txn(vec![
        json!({"event_id": "$two", "room_id": "!r", "sender": "@a:b", "type": "m.room.message", "origin_server_ts": 1, "content": {"pad": "x".repeat(2 * 1024 * 1024)}}),
    ]);
    // (case, method, uri, bearer token, body, status, errcode)
    type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, String, u16, Option<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        ("missing token", "PUT", put, None, ok_body.clone(), 401, Some("M_MISSING_TOKEN")),
        ("wrong token", "PUT", put, Some("nope"), ok_body.clone(), 403, Some("M_FORBIDDEN")),
        (
            "token in query",
            "PUT",
            "/_matrix/app/v1/transactions/2?access_token=hs_token_for_the_edge_tests",
            None,
            ok_body.clone(),
            200,
            None,
        ),
        (
            "wrong token in query",
            "PUT",
            "/_matrix/app/v1/transactions/2?access_token=x",
            None,
            ok_body.clone(),
            403,
            Some("M_FORBIDDEN"),
        ),
        (
            "header and query mismatch",
            "PUT",
            "/_matrix/app/v1/transactions/3?access_token=other",
            Some(TOKEN),
            ok_body.clone(),
            403,
            Some("M_FORBIDDEN"),
        ),
        ("malformed JSON", "PUT", put, Some(TOKEN), "{\"events\": [".into(), 400, Some("M_NOT_JSON")),
        ("non-object body", "PUT", put, Some(TOKEN), "[1, 2]".into(), 400, Some("M_BAD_JSON")),
        ("events not an array", "PUT", put, Some(TOKEN), "{\"events\": 5}".into(), 400, Some("M_BAD_JSON")),
        ("2 MiB body is a legal transaction", "PUT", put, Some(TOKEN), two_mib, 200, None),
        ("over the limit", "PUT", put, Some(TOKEN), big, 413, Some("M_TOO_LARGE")),
        ("unknown path", "GET", "/_matrix/app/v1/whatever", Some(TOKEN), String::new(), 404, Some("M_UNRECOGNIZED")),
        ("wrong method", "GET", put, Some(TOKEN), String::new(), 405, Some("M_UNRECOGNIZED")),
        ("legacy path", "PUT", "/transactions/3", Some(TOKEN), ok_body.clone(), 200, None),
        ("ping", "POST", "/_matrix/app/v1/ping", Some(TOKEN), "{\"transaction_id\": null}".into(), 200, None),
        (
            "room alias query",
            "GET",
            "/_matrix/app/v1/rooms/%23a%3Alocalhost",
            Some(TOKEN),
            String::new(),
            404,
            Some("M_NOT_FOUND"),
        ),
        (
            "user query outside the personas",
            "GET",
            "/_matrix/app/v1/users/%40rb_nobody%3Alocalhost",
            Some(TOKEN),
            String::new(),
            404,
            Some("M_NOT_FOUND"),
        ),
        (
            "legacy user query",
            "GET",
            "/users/%40alice%3Alocalhost",
            Some(TOKEN),
            String::new(),
            404,
            Some("M_NOT_FOUND"),
        ),
    ];
    for (name, method, uri, auth, body, status, errcode) in cases {
        let (got, json) = send(&e.app, method, uri, auth, body).await;
        assert_eq!(got.as_u16(), status, "{name}: {json}");
        match errcode {
            Some(code) => {
                assert_eq!(json["errcode"], code, "{name}");
                assert!(json["error"].is_string(), "{name}");
            }
            None => assert_eq!(json, json!({}), "{name}"),
        }
    }
    assert_eq!(send(&e.app, "GET", "/health", None, "").await.0, StatusCode::OK);
    assert_eq!(send(&e.app, "GET", "/ready", None, "").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_repeated_transaction_is_stored_once_and_a_mixed_one_adds_only_the_new() {
    let e = edge().await;
    let body = txn(vec![event("$a"), event("$b")]);
    for _ in 0..2 {
        let (status, _) = send(&e.app, "PUT", "/_matrix/app/v1/transactions/1", Some(TOKEN), body.clone()).await;
        assert_eq!(status, StatusCode::OK);
    }
    // Synapse restarted: txn ids start at 1 again, with a mix of old and new events.
    let mixed = txn(vec![event("$b"), event("$c"), json!({"no": "id"})]);
    assert_eq!(send(&e.app, "PUT", "/_matrix/app/v1/transactions/1", Some(TOKEN), mixed).await.0, StatusCode::OK);
    let ids: Vec<String> = e
        .store
        .room_events(ruma::room_id!("!r:localhost"))
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.event_id.to_string())
        .collect();
    assert_eq!(ids, ["$a", "$b", "$c"]);
    // Odd events are counted, not a reason to refuse the rest: a bad id, a non-object.
    let mut bad_room = event("$d");
    bad_room["room_id"] = json!("not a room id");
    let mut bad_sender = event("$e");
    bad_sender["sender"] = json!(42);
    let odd = txn(vec![bad_room, bad_sender, json!("just a string"), event("$f")]);
    assert_eq!(send(&e.app, "PUT", "/_matrix/app/v1/transactions/2", Some(TOKEN), odd).await.0, StatusCode::OK);
    let stored = e.store.room_events(ruma::room_id!("!r:localhost")).await.expect("events");
    assert_eq!(stored.last().map(|e| e.event_id.as_str()), Some("$f"));
    assert_eq!(stored.len(), 4);
    let text = e.metrics.render();
    for line in [
        "richbot_transactions_total 4",
        "richbot_events_stored_total 4",
        "richbot_events_duplicate_total 3",
        "richbot_events_malformed_total 4",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
}

/// Synapse can leave a transaction made at the end of its recovery unsent (`gaps.rs`): the
/// next one's events are stored, and a 503 makes it send the skipped one, then that one
/// again. The numbers are kept in the database, so on PostgreSQL too (instances sharing
/// it see each other's numbers) and across restarts.
#[tokio::test]
async fn a_transaction_after_a_skipped_number_is_stored_and_answered_503_once() {
    let e = edge().await;
    let put = |n: u32, id: &str| {
        let (app, body) = (e.app.clone(), txn(vec![event(id)]));
        async move { send(&app, "PUT", &format!("/_matrix/app/v1/transactions/{n}"), Some(TOKEN), body).await }
    };
    assert_eq!(put(10, "$ten").await.0, StatusCode::OK);
    assert_eq!(put(11, "$eleven").await.0, StatusCode::OK);
    let (status, body) = put(13, "$thirteen").await;
    let stored = || async {
        let events = e.store.room_events(ruma::room_id!("!r:localhost")).await.expect("events");
        events.into_iter().map(|e| e.event_id.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(stored().await, ["$ten", "$eleven", "$thirteen"], "stored before the answer");
    assert_eq!((status, body["errcode"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("M_UNKNOWN")));
    // The recoverer sends 12, then 13 again: both taken, 13's event once.
    assert_eq!(put(12, "$twelve").await.0, StatusCode::OK);
    assert_eq!(put(13, "$thirteen").await.0, StatusCode::OK);
    assert_eq!(stored().await, ["$ten", "$eleven", "$thirteen", "$twelve"]);
    // Asked once: a skip that does not come is not asked for again.
    assert_eq!(put(15, "$fifteen").await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(put(15, "$fifteen").await.0, StatusCode::OK);
}

/// Triage at the door: events in a room no persona is in are stored as history, already
/// handled, and queue no worker; a persona's membership makes the room watched, so its
/// later events wait for a worker; a redaction always goes to one (it scrubs history).
#[tokio::test]
async fn events_of_rooms_without_a_persona_are_settled_at_the_door() {
    let e = edge().await;
    let room = ruma::room_id!("!r:localhost");
    let put = |n: u32, events: Vec<Value>| {
        let app = e.app.clone();
        async move { send(&app, "PUT", &format!("/_matrix/app/v1/transactions/{n}"), Some(TOKEN), txn(events)).await.0 }
    };
    assert_eq!(put(1, vec![event("$a"), event("$b")]).await, StatusCode::OK);
    assert!(e.queue.is_empty(), "no worker for a room no persona is in");
    assert!(e.store.pending_events(room).await.expect("query").is_empty());
    assert_eq!(e.store.room_events(room).await.expect("events").len(), 2, "kept as history");

    let mut redaction = event("$r");
    redaction["type"] = json!("m.room.redaction");
    redaction["redacts"] = json!("$a");
    assert_eq!(put(2, vec![redaction]).await, StatusCode::OK);
    assert_eq!(e.queue.take(10, |_| true), [room.to_owned()], "a redaction is a worker's job");

    let invite = json!({"event_id": "$i", "room_id": "!r:localhost", "sender": "@alice:localhost",
        "type": "m.room.member", "state_key": "@richbot:localhost", "origin_server_ts": 1,
        "content": {"membership": "invite"}});
    assert_eq!(put(3, vec![invite, event("$c")]).await, StatusCode::OK);
    assert!(e.queue.watched(room));
    assert_eq!(e.queue.take(10, |_| true), [room.to_owned()]);
    let pending: Vec<String> =
        e.store.pending_events(room).await.expect("pending").iter().map(|e| e.event_id.to_string()).collect();
    assert_eq!(pending, ["$r", "$i", "$c"], "after the invite, every event waits for a worker");
    let text = e.metrics.render();
    assert!(text.lines().any(|l| l == "richbot_events_settled_total 2"), "{text}");
}

/// In a room a persona is in, chatter that addresses no persona is settled at the door when
/// the room is idle; a mention, a reply, or anything while the room is active goes to the
/// room's worker, in order.
#[tokio::test]
async fn chatter_in_an_idle_group_room_is_settled_at_the_door_and_a_mention_is_not() {
    let e = edge().await;
    let room = ruma::room_id!("!g:localhost");
    let members: Vec<ruma::OwnedUserId> = ["@richbot:localhost", "@alice:localhost", "@bob:localhost"]
        .iter()
        .map(|u| ruma::OwnedUserId::try_from(*u).expect("id"))
        .collect();
    e.store.set_joined_members(room, &members).await.expect("members");
    e.store.joined_members(room).await.expect("members"); // as a worker would: now known
    e.queue.watch(room);
    let msg = |id: &str, body: &str| {
        json!({"event_id": id, "room_id": "!g:localhost", "sender": "@alice:localhost", "type": "m.room.message",
               "origin_server_ts": 1, "content": {"msgtype": "m.text", "body": body}})
    };
    let put = |n: u32, events: Vec<Value>| {
        let app = e.app.clone();
        async move { send(&app, "PUT", &format!("/_matrix/app/v1/transactions/{n}"), Some(TOKEN), txn(events)).await.0 }
    };
    assert_eq!(put(1, vec![msg("$a", "lunch anyone?"), msg("$b", "richbots are fun")]).await, StatusCode::OK);
    assert!(
        e.queue.is_empty() && e.store.pending_events(room).await.expect("query").is_empty(),
        "chatter needs no worker"
    );

    let mut reply = msg("$c", "and tomorrow?");
    reply["content"]["m.relates_to"] = json!({"m.in_reply_to": {"event_id": "$x"}});
    assert_eq!(put(2, vec![msg("$m", "Richbot, the weather?"), msg("$d", "lunch?"), reply]).await, StatusCode::OK);
    let pending: Vec<String> =
        e.store.pending_events(room).await.expect("pending").iter().map(|e| e.event_id.to_string()).collect();
    assert_eq!(pending, ["$m", "$d", "$c"], "a mention goes to the worker, and so does what follows it");
    assert_eq!(e.queue.take(10, |_| true), [room.to_owned()]);
    // The worker's step ends with nothing left: the room is idle again.
    e.store
        .mark_processed(&e.store.pending_events(room).await.expect("p").iter().map(|e| e.seq).collect::<Vec<_>>())
        .await
        .expect("mark");
    e.queue.idle(room);
    assert_eq!(put(3, vec![msg("$e", "quiet again")]).await, StatusCode::OK);
    assert!(e.queue.is_empty(), "settled at the door once the room is idle");

    // Another instance's door (its own queue, nothing in memory) while a worker holds this
    // room's events: not idle, so its chatter goes to the worker too, in order. (Only
    // PostgreSQL is shared by instances; an SQLite file has one process.)
    if !crate::support::postgres::enabled() {
        return;
    }
    let other = edge_on(e.url.clone(), tempfile::tempdir().expect("tempdir")).await;
    assert_eq!(put(4, vec![msg("$n", "Richbot, and now?")]).await, StatusCode::OK);
    let put_other = |n: u32, events: Vec<Value>| {
        let app = other.app.clone();
        async move { send(&app, "PUT", &format!("/_matrix/app/v1/transactions/{n}"), Some(TOKEN), txn(events)).await.0 }
    };
    assert_eq!(put_other(1, vec![msg("$f", "lunch?")]).await, StatusCode::OK);
    let pending: Vec<String> =
        e.store.pending_events(room).await.expect("pending").iter().map(|e| e.event_id.to_string()).collect();
    assert_eq!(pending, ["$n", "$f"], "chatter behind a question waits behind it, whichever instance took it");
}

/// One HTTP/1.1 request on `stream`, keeping it open; the status line's code, or `None`
/// when the server closed the connection.
async fn get_on(stream: &mut tokio::net::TcpStream, path: &str) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut buf = vec![0u8; 1024];
    let n = stream.read(&mut buf).await.ok()?;
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    head.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test]
async fn at_the_connection_cap_an_idle_connection_makes_room_and_busy_ones_do_not() {
    // The slow route says when a request is in it, so the test knows both are busy.
    let (entered, mut inside) = tokio::sync::mpsc::unbounded_channel::<()>();
    let app = axum::Router::new().route("/fast", axum::routing::get(|| async { "ok" })).route(
        "/slow",
        axum::routing::get(move || {
            let entered = entered.clone();
            async move {
                let _ = entered.send(());
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                "slow"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(richbot::appservice::serve(listener, app, 2, async {
        let _ = stopped.await;
    }));
    let connect = || tokio::net::TcpStream::connect(addr);
    // Two kept-alive connections, idle after one request each: the cap.
    let mut idle1 = connect().await.expect("connect");
    assert_eq!(get_on(&mut idle1, "/fast").await, Some(200));
    let mut idle2 = connect().await.expect("connect");
    assert_eq!(get_on(&mut idle2, "/fast").await, Some(200));
    // A third gets in: the idlest makes room.
    let mut third = connect().await.expect("connect");
    assert_eq!(get_on(&mut third, "/fast").await, Some(200), "an idle connection made room");
    assert_eq!(get_on(&mut idle1, "/fast").await, None, "the idlest was closed");
    // Both open ones busy: a new one is closed at once, not queued.
    let (mut a, mut b) = (third, idle2);
    let busy_a = tokio::spawn(async move { get_on(&mut a, "/slow").await });
    let busy_b = tokio::spawn(async move { get_on(&mut b, "/slow").await });
    for _ in 0..2 {
        inside.recv().await.expect("a slow request is in");
    }
    let mut late = connect().await.expect("the kernel accepts");
    let started = std::time::Instant::now();
    assert_eq!(get_on(&mut late, "/fast").await, None, "refused while every connection is busy");
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "at once, not after the busy ones");
    assert_eq!((busy_a.await.expect("a"), busy_b.await.expect("b")), (Some(200), Some(200)), "busy ones finish");
    let _ = stop.send(());
    server.await.expect("join").expect("served");
}
