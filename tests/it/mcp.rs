//! MCP servers through richbot's client (`richbot::mcp`), against the test server written
//! with the official Python SDK: listing, calls, `isError`, a server that dies and is
//! started again, `tools/list_changed`, streamable HTTP, timeouts, and the name rules that
//! stop a start.

use std::time::Duration;

use richbot::mcp::{CallError, Mcp, Report};
use serde_json::json;

use crate::support::eventually;
use crate::support::mcp::{HttpServer, configs, log_lines, stdio_toml};

const RESERVED: [&str; 2] = ["rich_send", "rich_edit"];

fn tools_of(mcp: &Mcp, server: usize) -> Vec<String> {
    mcp.servers()
        .find(|(i, _, _)| *i == server)
        .map(|(_, _, t)| t.into_iter().map(|t| t.tool).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn tools_are_listed_and_called_and_failures_say_whose() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcp.log");
    let mcp = Mcp::start(&configs(&stdio_toml("t", &log, &[], "timeout_secs = 1")), &RESERVED).await.expect("start");
    let tools = tools_of(&mcp, 0);
    for name in ["echo", "fail", "slow", "delete", "die"] {
        assert!(tools.iter().any(|t| t == name), "{name} listed: {tools:?}");
    }
    assert_eq!(mcp.call(0, "echo", json!({"text": "hi there"})).await.map(|o| o.text), Ok("hi there".to_owned()));
    match mcp.call(0, "fail", json!({"why": "boom"})).await {
        Err(CallError::Failed(why)) => assert!(why.contains("failed on purpose: boom"), "{why}"),
        other => panic!("an isError result is the tool's failure: {other:?}"),
    }
    match mcp.call(0, "slow", json!({"tag": "a", "ms": 3000})).await {
        Err(CallError::Unavailable(why)) => assert!(why.contains("did not answer within 1 s"), "{why}"),
        other => panic!("a call past timeout_secs is unavailable: {other:?}"),
    }
    assert!(matches!(mcp.call(0, "echo", json!(["not", "an", "object"])).await, Err(CallError::Failed(_))));
    mcp.stop();
}

#[tokio::test]
async fn a_server_that_dies_fails_its_calls_clearly_and_is_started_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcp.log");
    let mcp = Mcp::start(&configs(&stdio_toml("t", &log, &[], "")), &RESERVED).await.expect("start");
    match mcp.call(0, "die", json!({})).await {
        Err(CallError::Unavailable(why)) => assert!(why.contains("MCP server t"), "{why}"),
        other => panic!("a server that dies mid-call: {other:?}"),
    }
    match mcp.call(0, "echo", json!({"text": "x"})).await {
        Err(CallError::Unavailable(why)) => assert!(why.contains("t"), "{why}"),
        other => panic!("a call while the server is down: {other:?}"),
    }
    let restarted = eventually("the server is started again", Duration::from_secs(20), || {
        let mcp = mcp.clone();
        async move { mcp.call(0, "echo", json!({"text": "back"})).await.ok().map(|o| o.text) }
    })
    .await;
    assert_eq!(restarted, "back");
    assert_eq!(log_lines(&log).iter().filter(|l| l.starts_with("started")).count(), 2, "{:?}", log_lines(&log));
    mcp.stop();
}

#[tokio::test]
async fn tools_are_listed_again_when_the_server_says_they_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcp.log");
    let mcp = Mcp::start(&configs(&stdio_toml("t", &log, &[], "")), &RESERVED).await.expect("start");
    assert!(!tools_of(&mcp, 0).contains(&"late".to_owned()));
    mcp.call(0, "add_tool", json!({"name": "late"})).await.expect("add_tool");
    eventually("the new tool is listed", Duration::from_secs(10), || {
        let mcp = mcp.clone();
        async move { tools_of(&mcp, 0).contains(&"late".to_owned()).then_some(()) }
    })
    .await;
    assert_eq!(mcp.call(0, "late", json!({"text": "new"})).await.map(|o| o.text), Ok("new".to_owned()));
    mcp.stop();
}

#[tokio::test]
async fn streamable_http_servers_are_called_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcp.log");
    let server = HttpServer::start(&log).await;
    let toml = format!("[[mcp]]\nname = \"web\"\nurl = \"{}\"\n", server.url);
    let mcp = Mcp::start(&configs(&toml), &RESERVED).await.expect("start");
    assert!(tools_of(&mcp, 0).contains(&"echo".to_owned()));
    assert_eq!(mcp.call(0, "echo", json!({"text": "over http"})).await.map(|o| o.text), Ok("over http".to_owned()));
    mcp.stop();
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_not_fatal() {
    let toml = "[[mcp]]\nname = \"gone\"\ncommand = \"/nonexistent/mcp-server\"\n";
    let mcp = Mcp::start(&configs(toml), &RESERVED).await.expect("a down server does not stop the start");
    match &mcp.report()[..] {
        [("gone", Err(Report::Down(why)))] => assert!(why.contains("cannot start /nonexistent/mcp-server"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(mcp.call(0, "echo", json!({})).await, Err(CallError::Unavailable(_))));
    mcp.stop();
}

#[tokio::test]
async fn a_name_clash_and_an_overlong_name_stop_the_start_naming_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcp.log");
    let clash = format!(
        "{}{}",
        stdio_toml("t_", &log, &["--extra-tool", "x"], ""),
        stdio_toml("t", &log, &["--extra-tool", "_x"], "")
    );
    let e = Mcp::start(&configs(&clash), &RESERVED).await.expect_err("a clash stops the start").to_string();
    assert!(
        e.contains("t___x clashes") && e.contains("MCP server t_") && e.contains("MCP server t (tool \"_x\")"),
        "{e}"
    );
    let long = "a_tool_whose_name_is_far_too_long_to_be_offered_to_any_model";
    let e = Mcp::start(&configs(&stdio_toml("files", &log, &["--extra-tool", long], "")), &RESERVED)
        .await
        .expect_err("an over-long name stops the start")
        .to_string();
    assert!(e.contains(&format!("files__{long}")) && e.contains("at most 64"), "{e}");
}

#[test]
fn mcp_config_mistakes_fail_validation_one_line_each_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("registration.yaml"),
        "id: richbot\nurl: \"http://127.0.0.1:9009\"\nas_token: as_token_long_enough_to_be_real\nhs_token: hs_token_long_enough_to_be_real\n\
         sender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@richbot_.*:localhost'}]\n",
    )
    .expect("registration");
    let text = "[homeserver]\nurl = \"http://127.0.0.1:9\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"registration.yaml\"\n\
         listen = \"127.0.0.1:9009\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n\
         [[personas]]\nlocalpart = \"richbot\"\ntools = [\"files\", \"nope\"]\n\
         [[mcp]]\nname = \"files\"\ncommand = \"x\"\n\
         [[mcp]]\nname = \"files\"\nurl = \"ftp://example.org\"\n\
         [[mcp]]\nname = \"a__b\"\ncommand = \"x\"\nurl = \"http://example.org/mcp\"\ntimeout_secs = 0\n\
         [[mcp]]\nname = \"web\"\nurl = \"http://example.org/mcp\"\nargs = [\"--x\"]\nrooms = [\"!*\"]\n\
         [[mcp]]\nname = \"none\"\n\
         [[mcp]]\nname = \"hdr\"\ncommand = \"x\"\nno_approval = [\"a\"]\nheaders = { Authorization = \"Bearer t\" }\n\
         [[mcp]]\nname = \"bad\"\nurl = \"http://x/mcp\"\nheaders = { Accept = \"x\", \"Bad Name\" = \"v\", X = \"line\\nbreak\" }\n";
    let path = dir.path().join("richbot.toml");
    let e = richbot::config::from_str(text, &path, dir.path(), std::iter::empty()).expect_err("invalid").to_string();
    for want in [
        "mcp[1].name: \"files\" is used by two servers",
        "mcp[1].url: must be an http(s) URL (got \"ftp://example.org\")",
        "mcp[2].name: \"a__b\" must be 1-32 of A-Z a-z 0-9 _ - without \"__\" (tools are offered as <name>__<tool>)",
        "mcp[2]: set command or url, not both",
        "mcp[2].timeout_secs: must be 1-86400",
        "mcp[3]: args and env are for a command, not a url",
        "mcp[4]: set command (a stdio server) or url (a streamable-HTTP server)",
        "personas[0].tools: \"nope\" is not the name of an [[mcp]] server",
        "mcp[5]: headers and headers_file are for a url, not a command",
        "mcp[5].no_approval: only with approval = \"*\" (every tool but these)",
        "mcp[6].headers: Accept is set by the MCP transport itself",
        "mcp[6].headers: \"Bad Name\" is not a valid header name",
        "mcp[6].headers: the value of X is not a valid header value",
    ] {
        assert!(e.lines().any(|l| l == want), "want {want:?} in:\n{e}");
    }
    assert_eq!(e.lines().count(), 13, "one line per mistake:\n{e}");
    assert!(!e.contains("Bearer t") && !e.contains("line"), "header values are never quoted:\n{e}");
}

#[tokio::test]
async fn listings_are_bounded_and_entries_that_name_no_tool_stop_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("mcp.log");
    let extra: Vec<String> = (0..20).map(|i| format!("extra_{i}")).collect();
    let args: Vec<&str> = extra.iter().flat_map(|e| ["--extra-tool", e.as_str()]).collect();
    let bounds = richbot::mcp::Bounds { tools: 10, schema_bytes: 8 * 1024 };
    let mcp = Mcp::start_with(&configs(&stdio_toml("t", &log, &args, "")), &RESERVED, bounds).await.expect("start");
    assert_eq!(tools_of(&mcp, 0).len(), 10, "at most limits.mcp_tools_per_server");
    let dropped = &mcp.dropped()[0].1;
    assert!(dropped.len() > 10 && dropped.iter().all(|d| d.contains("limits.mcp_tools_per_server")), "{dropped:?}");
    mcp.stop();
    let tiny = richbot::mcp::Bounds { tools: 64, schema_bytes: 120 };
    let mcp = Mcp::start_with(&configs(&stdio_toml("t", &log, &[], "")), &RESERVED, tiny).await.expect("start");
    assert!(mcp.dropped()[0].1.iter().any(|d| d.contains("-byte input schema, over 120 bytes")), "{:?}", mcp.dropped());
    mcp.stop();
    let typo = stdio_toml("t", &log, &[], "approval = [\"Delete\"]\nconcurrent = [\"slow\", \"nope\"]");
    let e = Mcp::start(&configs(&typo), &RESERVED).await.expect_err("entries that name no tool").to_string();
    assert!(e.contains("approval names \"Delete\"") && e.contains("concurrent names \"nope\""), "{e}");
    assert!(!e.contains("names \"slow\""), "{e}");
}

#[tokio::test]
async fn an_http_server_gets_its_headers_and_secrets_in_its_url_stay_out_of_errors() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(8);
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let tx = tx.clone();
        async move {
            let auth = headers.get("authorization").and_then(|h| h.to_str().ok()).unwrap_or_default().to_owned();
            let _ = tx.send(auth).await;
            axum::http::StatusCode::SERVICE_UNAVAILABLE
        }
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let toml = format!(
        "[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:{port}/mcp?api_key=sk-secret-1\"\nheaders = {{ Authorization = \"Bearer tok-2\" }}\n"
    );
    let mcp = Mcp::start(&configs(&toml), &RESERVED).await.expect("a down server does not stop the start");
    let auth = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.expect("a request").expect("headers");
    assert_eq!(auth, "Bearer tok-2");
    let down = match &mcp.report()[..] {
        [("web", Err(Report::Down(why)))] => why.clone(),
        other => panic!("{other:?}"),
    };
    assert!(!down.contains("sk-secret-1") && down.contains("api_key=***"), "{down}");
    match mcp.call(0, "echo", json!({"text": "x"})).await {
        Err(CallError::Unavailable(why)) => assert_eq!(why, "MCP server web is unavailable right now"),
        other => panic!("{other:?}"),
    }
    assert!(!format!("{:?}", configs(&toml)).contains("tok-2"), "Debug leaves the header values out");
    mcp.stop();
    server.abort();
}
