//! Schedules through the agents' channel, against the real Synapse: a client schedules a
//! message over HTTP (once per idempotency key; only where it may post; messages, not
//! prompts; bad times at their path), lists and cancels only its own, does the same
//! through MCP, and the message is posted once at its time. Each client has its own bound
//! of schedules, and a client removed from the config, or narrowed away from a room, has
//! its schedules there stopped when they come due. Its environment is `e2e_agents::env`:
//! an `Env::start` with two agent clients.

use std::time::Duration;

use richbot::clock::{now_ms, rfc3339};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::e2e_agents::{CI, OPS, env, env_with, get, post, posted, room};
use crate::support::eventually;

async fn delete(url: &str, path: &str, token: &str) -> (u16, Value) {
    let response =
        reqwest::Client::new().delete(format!("{url}{path}")).bearer_auth(token).send().await.expect("delete");
    (response.status().as_u16(), response.json().await.expect("a JSON answer"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_schedules_a_message_once_lists_and_cancels_only_its_own_and_it_is_posted_at_its_time() {
    let (env, url) = env().await;
    let ops = room(&env, Some("ops")).await;
    let other = room(&env, None).await;
    let at = (now_ms() + 10_000) / 1000 * 1000;
    let make = json!({"kind": "channel", "to": "#ops:localhost", "at": rfc3339(at), "message": "Deploy window opens",
                      "title": "Deploy", "idempotency_key": "deploy-1"});
    let (status, _, made) = post(&url, "/v1/schedules", CI, make.clone()).await;
    assert_eq!(status, 200, "{made}");
    assert_eq!(made["room"], ops.as_str());
    assert_eq!(made["next"], json!([rfc3339(at).replace('Z', "+00:00")]));
    let id = made["id"].as_i64().expect("an id");
    let (_, _, again) = post(&url, "/v1/schedules", CI, make).await;
    assert_eq!(again["id"], id, "the same key makes no second schedule");

    for (token, body, status, code, path) in [
        (
            CI,
            json!({"kind": "channel", "to": ops, "at": rfc3339(at), "prompt": "check"}),
            400,
            "invalid_arguments",
            "prompt",
        ),
        (CI, json!({"kind": "channel", "to": other, "at": rfc3339(at), "message": "x"}), 403, "room_not_allowed", ""),
        (
            CI,
            json!({"kind": "channel", "to": ops, "every": "FREQ=DAILY", "tz": "Nowhere/Else", "message": "x"}),
            400,
            "invalid_arguments",
            "tz",
        ),
        (
            CI,
            json!({"kind": "channel", "to": ops, "at": rfc3339(now_ms() - 60_000), "message": "x"}),
            400,
            "invalid_arguments",
            "at",
        ),
    ] {
        let (got, _, answer) = post(&url, "/v1/schedules", token, body.clone()).await;
        assert_eq!((got, answer["code"].as_str()), (status, Some(code)), "{body}: {answer}");
        if !path.is_empty() {
            assert_eq!(answer["path"], path, "{body}: {answer}");
        }
    }
    let (_, listed) = get(&url, "/v1/schedules", CI).await;
    assert_eq!(listed["schedules"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed["schedules"][0]["title"], "Deploy");
    let (_, theirs) = get(&url, "/v1/schedules", OPS).await;
    assert_eq!(theirs["schedules"], json!([]), "another client sees none of ci's");
    let (status, refused) = delete(&url, &format!("/v1/schedules/{id}"), OPS).await;
    assert_eq!((status, refused["code"].as_str()), (404, Some("not_found")), "{refused}");

    // The same over MCP, for the other client.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(OPS),
    );
    let mcp = ().serve(transport).await.expect("the MCP client connects");
    let tools: Vec<String> = mcp.list_all_tools().await.expect("tools").iter().map(|t| t.name.to_string()).collect();
    for name in ["schedule", "schedules", "unschedule"] {
        assert!(tools.contains(&name.to_owned()), "{name} in {tools:?}");
    }
    let call = |name: &str, args: Value| {
        let params =
            CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().expect("object"));
        let mcp = &mcp;
        async move { mcp.call_tool(params).await.expect("the call is answered").structured_content.expect("JSON") }
    };
    let daily = call("schedule", json!({"kind": "channel", "to": other, "every": "FREQ=DAILY;BYHOUR=9;BYMINUTE=0", "tz": "Europe/Lisbon", "message": "Good morning"})).await;
    let daily_id = daily["id"].as_i64().expect("an id");
    assert_eq!(daily["tz"], "Europe/Lisbon", "{daily}");
    assert_eq!(call("schedules", json!({})).await["schedules"][0]["id"], daily_id);
    assert_eq!(call("unschedule", json!({"id": daily_id})).await, json!({"id": daily_id, "cancelled": true}));
    assert_eq!(call("schedules", json!({})).await["schedules"], json!([]));
    mcp.cancel().await.expect("closed");

    eventually("the scheduled message is posted", Duration::from_secs(60), || async {
        (posted(&env, &ops, "Deploy window opens").await == 1).then_some(())
    })
    .await;
    let (status, _) = delete(&url, &format!("/v1/schedules/{id}"), CI).await;
    assert_eq!(status, 404, "a fired one-off is no longer active");
    let turns = env.wait_turns(&ops, 1).await;
    assert_eq!(turns.iter().filter(|t| t.0 == "scheduled").count(), 1, "{turns:?}");
    assert_eq!(posted(&env, &ops, "Deploy window opens").await, 1, "posted once");
}

/// Clients of one persona need not trust each other: each has its own bound of schedules
/// (`schedules.per_user`), and a client removed from the config, or narrowed away from a
/// room, has its schedules there stopped when they come due, nothing posted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_has_its_own_bound_and_a_removed_or_narrowed_clients_schedules_stop_when_due() {
    let (mut env, url) = env_with("[schedules]\nper_user = 2\n").await;
    let ops = room(&env, Some("ops")).await;
    let other = room(&env, None).await;
    let at = rfc3339((now_ms() + 15_000) / 1000 * 1000);
    let schedule = |to: &str, message: &str| json!({"kind": "channel", "to": to, "at": at, "message": message});
    let mut made = Vec::new();
    for (token, to, message) in
        [(CI, "#ops:localhost", "ci 1"), (CI, "#ops:localhost", "ci 2"), (OPS, other.as_str(), "ops 1")]
    {
        let (status, _, answer) = post(&url, "/v1/schedules", token, schedule(to, message)).await;
        assert_eq!(status, 200, "{message}: {answer}");
        made.push(answer["id"].as_i64().expect("an id"));
    }
    let (status, _, refused) = post(&url, "/v1/schedules", CI, schedule("#ops:localhost", "ci 3")).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("limit_reached")), "{refused}");
    assert!(refused["error"].as_str().is_some_and(|e| e.starts_with("this client has 2")), "{refused}");

    // ci leaves the config; ops may post only in a room that is not `other`.
    env.bot.stop().await;
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    let ci_block = config.find("[[agents.clients]]\nname = \"ci\"").expect("ci's block");
    let ci_end = ci_block + config[ci_block..].find("\n\n").expect("its end") + 2;
    let narrowed = format!("{}{}", &config[..ci_block], &config[ci_end..])
        .replace("rooms = [\"!*\"]", "rooms = [\"#ops:localhost\"]");
    std::fs::write(&env.config_path, narrowed).expect("write");
    env.start_bot_again().await;
    let store = env.store().await;
    for id in made {
        eventually("the schedule is stopped when it comes due", Duration::from_secs(90), || async {
            let row = store.schedule(id).await.expect("store").expect("a schedule");
            (row.state == "stopped").then_some(())
        })
        .await;
    }
    for (room, body) in [(&ops, "ci 1"), (&ops, "ci 2"), (&other, "ops 1")] {
        assert_eq!(posted(&env, room, body).await, 0, "{body} was not posted");
    }
}
