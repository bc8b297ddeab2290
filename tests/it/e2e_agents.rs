//! The agents' channel against a real Synapse: an `rmcp` client and plain HTTP callers
//! post through richbot, exactly once (a repeated key after a restart posts nothing),
//! only where their client may, edit only their own messages at the pace, and read back
//! people's replies and reactions, which start no turn of the model; a direct message to
//! an encrypted client goes out encrypted.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::e2ee::{E2ee, from};
use crate::support::llm::text;
use crate::support::{BOT, Env, Options, enc, eventually, synapse};

pub const CI: &str = "ci-0123456789abcdef0123456789abcdef";
pub const OPS: &str = "ops-fedcba9876543210fedcba9876543210";
const WAIT: Duration = Duration::from_secs(30);

/// An environment with two agent clients: `ci` (the `#ops` alias, direct to alice) and
/// `ops` (any room, two writes a minute); returns the channel's base URL.
pub async fn env() -> (Env, String) {
    env_with("").await
}

/// [`env`], with `more` TOML after the clients.
pub async fn env_with(more: &str) -> (Env, String) {
    let port = synapse::free_port();
    let extra_toml = format!(
        "[agents]\nlisten = \"127.0.0.1:{port}\"\n\n\
         [[agents.clients]]\nname = \"ci\"\ntoken = \"{CI}\"\npersona = \"richbot\"\nrooms = [\"#ops:localhost\"]\nusers = [\"@alice:localhost\"]\n\n\
         [[agents.clients]]\nname = \"ops\"\ntoken = \"{OPS}\"\npersona = \"richbot\"\nrooms = [\"!*\"]\nwrites_per_minute = 2\n\n{more}"
    );
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    (env, format!("http://127.0.0.1:{port}"))
}

/// A room alice made and the persona joined, with `alias` if given.
pub async fn room(env: &Env, alias: Option<&str>) -> String {
    let mut body = json!({"invite": [BOT]});
    if let Some(alias) = alias {
        body["room_alias_name"] = alias.into();
    }
    let room = env.alice.create_room_with(body).await;
    env.wait_joined(&room, BOT).await;
    // And richbot has recorded it (it learns the members just after its join, which
    // Alice may see first): a client's post checks that record.
    let (store, id) = (env.store().await, crate::support::room_id(&room));
    eventually("richbot records its join", WAIT, || async {
        store.joined_members(&id).await.expect("members").iter().any(|u| u == BOT).then_some(())
    })
    .await;
    room
}

/// `POST {url}{path}` with `token`: the status, the `Retry-After` header and the body.
pub async fn post(url: &str, path: &str, token: &str, body: Value) -> (u16, Option<String>, Value) {
    let response =
        reqwest::Client::new().post(format!("{url}{path}")).bearer_auth(token).json(&body).send().await.expect("post");
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (status, retry, response.json().await.expect("a JSON answer"))
}

/// `GET {url}{path}` with `token`: the status and the body.
pub async fn get(url: &str, path: &str, token: &str) -> (u16, Value) {
    let response = reqwest::Client::new().get(format!("{url}{path}")).bearer_auth(token).send().await.expect("get");
    (response.status().as_u16(), response.json().await.expect("a JSON answer"))
}

fn weather(city: &str) -> Value {
    json!({"v": 1, "blocks": [{"type": "weather", "location": city, "temp": 21, "unit": "C", "condition": "Sunny"}]})
}

/// The persona's messages in `room` whose body is `body` (edits aside).
pub async fn posted(env: &Env, room: &str, body: &str) -> usize {
    let messages = env.alice.messages_from(room, BOT).await;
    messages.iter().filter(|m| m["content"]["body"] == body).count()
}

#[tokio::test]
async fn an_agent_posts_through_mcp_and_http_once_only_where_allowed_and_reads_the_answers() {
    let (mut env, url) = env().await;
    let ops = room(&env, Some("ops")).await;
    let other = room(&env, None).await;

    // An rmcp client: the rich tools with the model's checks, where `room` may be an alias.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(CI),
    );
    let mcp = ().serve(transport).await.expect("the MCP client connects");
    let tools: Vec<String> = mcp.list_all_tools().await.expect("tools").iter().map(|t| t.name.to_string()).collect();
    for name in ["rich_send", "rich_edit", "send", "replies"] {
        assert!(tools.contains(&name.to_owned()), "{name} in {tools:?}");
    }
    let call = |name: &str, args: Value| {
        let params =
            CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().expect("object"));
        let mcp = &mcp;
        async move { mcp.call_tool(params).await.expect("the call is answered") }
    };
    let sent = call(
        "rich_send",
        json!({"room": "#ops:localhost", "payload": weather("Lisbon"), "fallback": "Lisbon: 21 °C, sunny"}),
    )
    .await;
    assert_eq!(sent.is_error, Some(false), "{sent:?}");
    let receipt = sent.structured_content.expect("a receipt");
    assert_eq!(receipt["room_id"], ops.as_str());
    assert_eq!(receipt["deduplicated"], false);
    let messages = env.wait_messages(&ops, BOT, 1).await;
    let message =
        messages.iter().find(|m| m["event_id"] == receipt["message_id"]).expect("the rich message is in #ops");
    let payload = richbot::blocks::read_payload(&message["content"]).expect("it carries its blocks");
    assert_eq!(payload["blocks"][0]["location"], "Lisbon");

    // A bad payload: the block's path, as the model gets it, and nothing posted.
    let bad = json!({"v": 1, "blocks": [{"type": "weather", "location": "Oslo"}]});
    let refused = call("rich_send", json!({"room": ops, "payload": bad, "fallback": "Oslo"})).await;
    assert_eq!(refused.is_error, Some(true));
    let error = refused.structured_content.expect("an error object");
    assert_eq!(error["code"], "invalid_arguments", "{error}");
    assert!(error["path"].as_str().is_some_and(|p| p.starts_with("payload.blocks[0]")), "{error}");
    assert_eq!(posted(&env, &ops, "Oslo").await, 0);
    // rich_edit: the message it sent, where it is (no room needed).
    let edit =
        json!({"event_id": receipt["message_id"], "payload": weather("Lisbon, later"), "fallback": "Lisbon: 23 °C"});
    let edited = call("rich_edit", edit).await;
    assert_eq!(edited.is_error, Some(false), "{edited:?}");
    let edited = edited.structured_content.expect("a receipt");
    assert_eq!((&edited["message_id"], &edited["room_id"]), (&receipt["message_id"], &receipt["room_id"]));
    assert_ne!(edited["event_id"], receipt["message_id"], "the edit is an event of its own");

    // Only where the client may: a room outside its list, a wrong token.
    let (status, _, body) = post(&url, "/v1/send", CI, json!({"kind": "channel", "to": other, "body": "hi"})).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("room_not_allowed")), "{body}");
    let (status, _, body) =
        post(&url, "/v1/send", "not-a-token", json!({"kind": "channel", "to": ops, "body": "hi"})).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthorized")), "{body}");
    let (status, _, body) =
        post(&url, "/v1/send", CI, json!({"kind": "direct", "to": "@bob:localhost", "body": "hi"})).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("user_not_allowed")), "{body}");

    // A direct message opens the DM once, and the next one goes to the same room.
    let (status, _, first) =
        post(&url, "/v1/send", CI, json!({"kind": "direct", "to": "@alice:localhost", "body": "build 1 is green"}))
            .await;
    assert_eq!(status, 200, "{first}");
    let (_, _, second) = post(
        &url,
        "/v1/send",
        CI,
        json!({"channel": "matrix", "kind": "direct", "to": "@alice:localhost", "body": "build 2 is green"}),
    )
    .await;
    assert_eq!(first["room_id"], second["room_id"], "one DM, reused");
    let dm = first["room_id"].as_str().expect("room").to_owned();
    env.alice.join(&dm).await;
    assert_eq!(env.alice.joined_members(&dm).await.len(), 2);

    // Exactly once: the same key is the same message, a restart changes nothing, and the
    // same key for another message is a conflict.
    let keyed =
        json!({"kind": "channel", "to": "#ops:localhost", "body": "deploy 42 is live", "idempotency_key": "deploy-42"});
    let (status, _, original) = post(&url, "/v1/send", CI, keyed.clone()).await;
    assert_eq!((status, &original["deduplicated"]), (200, &json!(false)), "{original}");
    let (_, _, again) = post(&url, "/v1/send", CI, keyed.clone()).await;
    assert_eq!((&again["message_id"], &again["deduplicated"]), (&original["message_id"], &json!(true)));
    env.bot.stop().await;
    env.start_bot_again().await;
    eventually("the channel is back", WAIT, || {
        let url = url.clone();
        async move { reqwest::get(format!("{url}/v1/send")).await.ok().map(drop) }
    })
    .await;
    let (status, _, after) = post(&url, "/v1/send", CI, keyed.clone()).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!((&after["message_id"], &after["deduplicated"]), (&original["message_id"], &json!(true)));
    let mut conflict = keyed.clone();
    conflict["body"] = "deploy 43 is live".into();
    let (status, _, body) = post(&url, "/v1/send", CI, conflict).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("idempotency_conflict")), "{body}");
    assert_eq!(posted(&env, &ops, "deploy 42 is live").await, 1, "one message for three calls");

    // Replies back: a person's reply and a ✅, with their senders; neither asks the model.
    let message_id = original["message_id"].as_str().expect("id").to_owned();
    let reply =
        json!({"msgtype": "m.text", "body": "thanks", "m.relates_to": {"m.in_reply_to": {"event_id": message_id}}});
    env.alice.send(&ops, "m.room.message", reply).await;
    let reaction = json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": message_id, "key": "✅"}});
    env.alice.send(&ops, "m.reaction", reaction).await;
    let path = format!("{url}/v1/messages/{}/replies", enc(&message_id));
    let replies = eventually("the reply and the reaction", WAIT, || {
        let path = path.clone();
        async move {
            let answer: Value =
                reqwest::Client::new().get(&path).bearer_auth(CI).send().await.ok()?.json().await.ok()?;
            let replies = answer["replies"].as_array().cloned().unwrap_or_default();
            (replies.len() == 2).then_some(replies)
        }
    })
    .await;
    assert_eq!(
        (replies[0]["kind"].as_str(), replies[0]["body"].as_str()),
        (Some("reply"), Some("thanks")),
        "{replies:?}"
    );
    assert_eq!(
        (replies[1]["kind"].as_str(), replies[1]["key"].as_str()),
        (Some("reaction"), Some("✅")),
        "{replies:?}"
    );
    assert!(replies.iter().all(|r| r["sender"] == "@alice:localhost"), "{replies:?}");
    let by_mcp = call("replies", json!({"message_id": message_id})).await.structured_content.expect("replies");
    assert_eq!(by_mcp["replies"].as_array().map(Vec::len), Some(2), "{by_mcp}");
    let (status, _, body) = {
        let response = reqwest::Client::new().get(&path).bearer_auth(OPS).send().await.expect("get");
        (response.status().as_u16(), (), response.json::<Value>().await.expect("json"))
    };
    assert_eq!((status, body["code"].as_str()), (403, Some("not_owner")), "another client's message: {body}");
    // A question after them is the model's first request: they asked it nothing.
    env.llm.script([text("pong")]);
    env.alice.say(&ops, "richbot: ping").await;
    eventually("the answer to the ping", WAIT, || async { (posted(&env, &ops, "pong").await == 1).then_some(()) })
        .await;
    assert_eq!(env.llm.requests().len(), 1, "the reply and the reaction started no turn");
    mcp.cancel().await.expect("the MCP client closes");
}

#[tokio::test]
async fn a_client_edits_only_its_own_messages_at_the_pace_and_within_its_writes_a_minute() {
    let (env, url) = env().await;
    let ops = room(&env, Some("ops")).await;
    let (status, _, sent) =
        post(&url, "/v1/send", CI, json!({"kind": "channel", "to": ops, "body": "deploy: queued"})).await;
    assert_eq!(status, 200, "{sent}");
    let message_id = sent["message_id"].clone();

    // Another client may not edit it.
    let (status, _, body) = post(&url, "/v1/edit", OPS, json!({"message_id": message_id, "body": "mine now"})).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("not_owner")), "{body}");

    // Two quick edits land in turn, at least 2.5 s apart; a rich one keeps its blocks.
    // Which lands first is the server's to decide: sent 100 ms apart, the second request
    // may overtake the first on a loaded machine.
    let rich = json!({"message_id": message_id, "payload": weather("Porto"), "fallback": "deploy: done (Porto 21 °C)"});
    let (a, b) =
        tokio::join!(post(&url, "/v1/edit", CI, json!({"message_id": message_id, "body": "deploy: running"})), async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            post(&url, "/v1/edit", CI, rich).await
        });
    assert_eq!((a.0, b.0), (200, 200), "{} {}", a.2, b.2);
    assert_eq!(b.2["message_id"], message_id, "an edit's receipt names the message edited");
    let edits = eventually("both edits", WAIT, || async {
        let all = env.alice.messages_from(&ops, BOT).await;
        let edits: Vec<Value> =
            all.into_iter().filter(|m| m["content"]["m.relates_to"]["rel_type"] == "m.replace").collect();
        (edits.len() == 2).then_some(edits)
    })
    .await;
    let mut ts: Vec<i64> = edits.iter().map(|m| m["origin_server_ts"].as_i64().expect("ts")).collect();
    ts.sort_unstable();
    assert!(ts[1] - ts[0] >= 2_450, "edits of one message 2.5 s apart: {ts:?}");
    // The condition the text left out is completed from the block.
    let bodies: Vec<&Value> = edits.iter().map(|m| &m["content"]["m.new_content"]["body"]).collect();
    assert!(
        bodies.contains(&&json!("deploy: done (Porto 21 °C)\n\n🌡\u{fe0f} Porto: 21 °C, Sunny")),
        "the rich edit's fallback: {bodies:?}"
    );
    assert!(bodies.contains(&&json!("deploy: running")), "the plain edit: {bodies:?}");

    // Two writes a minute for `ops`: the third waits, and is told how long.
    for n in 1..=2 {
        let (status, _, body) =
            post(&url, "/v1/send", OPS, json!({"kind": "channel", "to": ops, "body": format!("ops {n}")})).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, retry, body) =
        post(&url, "/v1/send", OPS, json!({"kind": "channel", "to": ops, "body": "ops 3"})).await;
    assert_eq!((status, body["code"].as_str()), (429, Some("rate_limited")), "{body}");
    assert!(retry.and_then(|r| r.parse::<u64>().ok()).is_some_and(|s| (1..=30).contains(&s)), "Retry-After");
    assert_eq!(posted(&env, &ops, "ops 3").await, 0);
    let metrics = env.metrics().await;
    for line in [
        "richbot_agent_writes_total{client=\"ci\",result=\"ok\"} 3",
        "richbot_agent_writes_total{client=\"ops\",result=\"rate_limited\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_message_to_an_encrypted_client_goes_out_encrypted_and_its_reply_is_read_back() {
    let (env, url) = env().await;
    crate::e2e_encrypted::devices_ready(&env).await;
    let mut alice = E2ee::login(&env.synapse.url, "alice", env.dir.path()).await;
    let direct = |body: &str| json!({"kind": "direct", "to": "@alice:localhost", "body": body});
    let (status, _, first) = post(&url, "/v1/send", CI, direct("build 7 failed")).await;
    assert_eq!(status, 200, "{first}");
    let room = first["room_id"].as_str().expect("room").to_owned();
    alice.join(&room).await;
    let (_, _, second) = post(&url, "/v1/send", CI, direct("build 8 is green")).await;
    assert_eq!(second["room_id"], room.as_str(), "the same DM");

    let events = alice.wait_messages(&room, BOT, 2).await;
    let ours = from(&events, BOT);
    assert!(
        ours.iter().all(|e| e["wire_type"] == "m.room.encrypted" && e["decryption_failure"].is_null()),
        "both went out encrypted and decrypt: {ours:#?}"
    );
    let bodies: Vec<&str> = ours.iter().filter_map(|e| e["content"]["body"].as_str()).collect();
    assert_eq!(bodies, ["build 7 failed", "build 8 is green"]);

    let message_id = second["message_id"].as_str().expect("id").to_owned();
    let reply =
        json!({"msgtype": "m.text", "body": "on it", "m.relates_to": {"m.in_reply_to": {"event_id": message_id}}});
    alice.send(&room, reply).await;
    let path = format!("{url}/v1/messages/{}/replies", enc(&message_id));
    let replies = eventually("the encrypted reply, read back in clear", WAIT, || {
        let path = path.clone();
        async move {
            let answer: Value =
                reqwest::Client::new().get(&path).bearer_auth(CI).send().await.ok()?.json().await.ok()?;
            answer["replies"].as_array().filter(|r| !r.is_empty()).cloned()
        }
    })
    .await;
    assert_eq!((replies[0]["body"].as_str(), replies[0]["sender"].as_str()), (Some("on it"), Some("@alice:localhost")));
    // A plain message after it is the model's first request: the reply asked it nothing.
    env.llm.script([text("hello alice")]);
    alice.say(&room, "hello").await;
    alice.wait_messages(&room, BOT, 3).await;
    assert_eq!(env.llm.requests().len(), 1, "a reply to the client's message in a DM is not a question");
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_keep_one_message_per_key_and_the_pace_for_every_call() {
    let (env, url) = env().await;
    let ops = room(&env, Some("ops")).await;

    // Six calls at once with one key: one message; the others get its receipt.
    let body = json!({"kind": "channel", "to": ops, "body": "release 1.2 shipped", "idempotency_key": "rel-1.2"});
    let answers = futures::future::join_all((0..6).map(|_| post(&url, "/v1/send", CI, body.clone()))).await;
    assert!(answers.iter().all(|(status, _, _)| *status == 200), "{answers:?}");
    let fresh: Vec<_> = answers.iter().filter(|(_, _, a)| a["deduplicated"] == false).collect();
    assert_eq!(fresh.len(), 1, "one call wrote, the others were deduplicated: {answers:?}");
    assert!(answers.iter().all(|(_, _, a)| a["message_id"] == fresh[0].2["message_id"]), "{answers:?}");
    assert_eq!(posted(&env, &ops, "release 1.2 shipped").await, 1);

    // `ops` may write twice a minute: with its bucket emptied, 6 calls at once for each
    // of 5 keys land nothing (one at most, should a refill come while they run), and
    // none fails inside richbot.
    for n in 1..=2 {
        let (status, _, answer) =
            post(&url, "/v1/send", OPS, json!({"kind": "channel", "to": ops, "body": format!("warm {n}")})).await;
        assert_eq!(status, 200, "{answer}");
    }
    let bodies: Vec<Value> = (0..5)
        .flat_map(|key| {
            let body = json!({"kind": "channel", "to": ops, "body": format!("burst {key}"), "idempotency_key": format!("b{key}")});
            std::iter::repeat_n(body, 6)
        })
        .collect();
    let calls = bodies.into_iter().map(|body| post(&url, "/v1/send", OPS, body));
    let answers = futures::future::join_all(calls).await;
    let statuses: Vec<u16> = answers.iter().map(|(status, _, _)| *status).collect();
    assert!(statuses.iter().all(|s| [200, 429].contains(s)), "only receipts and rate_limited: {answers:?}");
    let ok = statuses.iter().filter(|s| **s == 200).count();
    let mut landed = 0;
    for key in 0..5 {
        landed += posted(&env, &ops, &format!("burst {key}")).await;
    }
    assert!(landed <= 1, "{landed} messages landed past an empty bucket: {statuses:?}");
    assert!(ok <= 6 * landed, "a receipt only for a message that landed: {statuses:?}");

    // A body over the limit gets the failure object, as JSON.
    let big = json!({"kind": "channel", "to": ops, "body": "x".repeat(1_100_000)});
    let (status, _, answer) = post(&url, "/v1/send", CI, big).await;
    assert_eq!((status, answer["code"].as_str()), (413, Some("too_large")), "{answer}");
}

#[tokio::test]
async fn replies_are_read_only_where_the_client_may_still_post() {
    let (env, url) = env().await;
    let ops = room(&env, Some("ops")).await;
    let (status, _, sent) = post(&url, "/v1/send", CI, json!({"kind": "channel", "to": ops, "body": "deploy?"})).await;
    assert_eq!(status, 200, "{sent}");
    let path = format!("/v1/messages/{}/replies", enc(sent["message_id"].as_str().expect("id")));
    let (status, answer) = get(&url, &path, CI).await;
    assert_eq!(status, 200, "{answer}");
    // The alias `ci` may post under now names no room: the room is no longer the client's.
    let (status, answer) = env
        .alice
        .call(reqwest::Method::DELETE, &format!("/_matrix/client/v3/directory/room/{}", enc("#ops:localhost")), None)
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = get(&url, &path, CI).await;
    assert_eq!((status, answer["code"].as_str()), (403, Some("room_not_allowed")), "{answer}");
}
