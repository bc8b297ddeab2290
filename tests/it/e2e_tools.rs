//! MCP tools in turns, against a real Synapse, the scripted LLM and the test MCP server:
//! results and failures reach the model as tool results, approval by the asker (and only
//! the asker), refusals and timeouts, a restart while waiting, parallel calls, who is
//! offered what, and the start-up and `check` lines.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::llm::{Step, text};
use crate::support::mcp::{log_lines, stdio_toml};
use crate::support::{BOT, Env, Options, User, eventually, room_id};

/// An environment whose config has the test MCP server as `t` (with `more` TOML for it)
/// and `after` appended; the server's log is the returned path.
async fn env_with(more: &str, after: &str) -> (Env, tempfile::TempDir, PathBuf) {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("mcp.log");
    let extra_toml = format!("{}{after}", stdio_toml("t", &log, &[], more));
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    (env, logs, log)
}

fn calls(list: &[(&str, Value)]) -> Step {
    Step::Calls(list.iter().map(|(n, a)| ((*n).to_owned(), a.to_string())).collect())
}

/// The tool results of a request's last round, in order, as sent.
fn results(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_assistant = messages.iter().rposition(|m| m["role"] == "assistant").unwrap_or(0);
    messages[last_assistant..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn code(result: &str) -> String {
    serde_json::from_str::<Value>(result).ok().and_then(|v| v["code"].as_str().map(str::to_owned)).unwrap_or_default()
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .map(str::to_owned)
        .collect()
}

fn ran(log: &std::path::Path, tool: &str) -> Vec<String> {
    log_lines(log).into_iter().filter(|l| l.starts_with(&format!("ran {tool} "))).collect()
}

/// The persona's approval requests in `room` (not their edits).
async fn approval_notices(user: &User, room: &str) -> Vec<Value> {
    user.messages_from(room, BOT)
        .await
        .into_iter()
        .filter(|m| {
            m["content"]["msgtype"] == "m.notice"
                && m["content"]["body"].as_str().is_some_and(|b| b.contains("May I run"))
        })
        .collect()
}

/// The first approval notice in `room`. Some tests ask just after richbot was replaced by
/// a `serve` process; a send of Synapse's that fails then (the old process's connections
/// closing) is retried only after 2, 4, 8, 16 s. One loaded CI run waited over 30 s here,
/// so the wait is generous.
async fn wait_notice(env: &Env, room: &str) -> String {
    let alice = env.alice.clone();
    let notice = eventually("the approval request", Duration::from_secs(90), || {
        let alice = alice.clone();
        async move { approval_notices(&alice, room).await.into_iter().next() }
    })
    .await;
    notice["event_id"].as_str().expect("id").to_owned()
}

async fn react(user: &User, room: &str, target: &str, key: &str) -> String {
    user.send(room, "m.reaction", json!({"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": key}}))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_results_and_failures_reach_the_model_and_the_turn_still_answers() {
    let (env, _logs, log) = env_with("", "").await;
    env.llm.script([
        calls(&[("t__echo", json!({"text": "pong"})), ("t__fail", json!({"why": "boom"}))]),
        calls(&[("t__die", json!({}))]),
        text("All done."),
    ]);
    let room = env.dm().await;
    env.alice.say(&room, "use your tools").await;
    let msgs = env.wait_messages(&room, BOT, 1).await;
    assert_eq!(msgs[0]["content"]["body"], "All done.");
    let requests = env.llm.requests();
    let tools = offered(&requests[0]);
    for name in ["rich_send", "rich_edit", "t__echo", "t__fail", "t__die", "t__delete", "t__lookup"] {
        assert!(tools.iter().any(|t| t == name), "{name} offered: {tools:?}");
    }
    // Every schema offered is one llama.cpp, vLLM and Ollama can turn into a grammar; the
    // lookup tool's (a \d pattern, a uri format, a fractional bound) is offered without them.
    for tool in requests[0]["tools"].as_array().expect("tools") {
        let problems = richbot::agent::portable::problems(&tool["function"]["parameters"]);
        assert!(problems.is_empty(), "{}: {problems:?}", tool["function"]["name"]);
    }
    let lookup = requests[0]["tools"].as_array().into_iter().flatten().find(|t| t["function"]["name"] == "t__lookup");
    let lookup = &lookup.expect("lookup")["function"]["parameters"]["properties"];
    assert_eq!(
        (
            &lookup["id"]["type"],
            &lookup["id"]["pattern"],
            &lookup["page"]["format"],
            &lookup["score"]["exclusiveMinimum"]
        ),
        (&json!("string"), &Value::Null, &Value::Null, &Value::Null),
        "{lookup}"
    );
    let first = results(&requests[1]);
    assert_eq!(first[0], "pong");
    assert_eq!(code(&first[1]), "tool_failed", "{first:?}");
    assert!(first[1].contains("failed on purpose: boom"), "{first:?}");
    let second = results(&requests[2]);
    assert_eq!(code(&second[0]), "tool_unavailable", "a server that dies mid-call: {second:?}");
    assert!(second[0].contains("MCP server t"), "{second:?}");
    assert_eq!(env.wait_turns(&room, 1).await[0].0, "answered");
    assert_eq!(ran(&log, "echo").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_gated_call_runs_on_the_askers_check_mark_and_no_one_elses() {
    let (env, _logs, log) = env_with("approval = [\"delete\"]", "").await;
    env.llm.script([calls(&[("t__delete", json!({"path": "/srv/share/old.txt"}))]), text("Deleted.")]);
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    env.alice.say(&room, "Richbot, delete old.txt please").await;
    let notice = wait_notice(&env, &room).await;
    let asked = approval_notices(&env.alice, &room).await.remove(0);
    let content = &asked["content"];
    assert_eq!(content["m.mentions"], json!({"user_ids": ["@alice:localhost"]}));
    let body = content["body"].as_str().expect("body");
    assert!(body.contains("t__delete") && body.contains("/srv/share/old.txt") && body.contains("✅"), "{body}");
    let blocks = content["com.ianm.mtrix"]["blocks"].as_array().expect("blocks");
    assert_eq!(blocks[1]["buttons"][0]["action"], json!({"type": "react", "key": "✅"}));

    // Bob is not the asker: his ❌ and ✅ count for nothing (a counted ❌ would refuse).
    react(&env.bob, &room, &notice, "❌").await;
    react(&env.bob, &room, &notice, "✅").await;
    let yes = react(&env.alice, &room, &notice, "✅\u{fe0f}").await;
    let msgs = eventually("the answer", Duration::from_secs(30), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Deleted.").then_some(m)
    })
    .await;
    assert_eq!(ran(&log, "delete"), [r#"ran delete {"path": "/srv/share/old.txt"}"#]);
    assert_eq!(results(&env.llm.requests()[1]), ["deleted /srv/share/old.txt"]);
    let store = env.store().await;
    let approval = store.approvals_by_notice(&[notice.as_str()]).await.expect("approvals").remove(0);
    assert_eq!(approval.decision.as_deref(), Some("allow"));
    assert_eq!(approval.decided_by.as_ref().map(|e| e.as_str()), Some(yes.as_str()), "decided by the asker's reaction");
    let edited = msgs.iter().any(|m| {
        m["content"]["m.relates_to"]["event_id"] == notice.as_str()
            && m["content"]["m.new_content"]["body"].as_str().is_some_and(|b| b.contains("allowed t__delete"))
    });
    assert!(edited, "the request says it was allowed: {msgs:#?}");
    let turns = env.wait_turns(&room, 1).await;
    assert_eq!(turns.len(), 1, "no reaction started a turn of its own: {turns:?}");
    assert_eq!(store.pending_events(&room_id(&room)).await.expect("pending").len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_or_no_answer_is_not_approved_and_the_wait_is_not_the_turns_time() {
    // The turn deadline (4 s) is shorter than the approval timeout (6 s): only a deadline
    // that stops while the asker decides lets the model hear "not approved" and answer.
    let (env, _logs, log) =
        env_with("approval = [\"delete\"]\napproval_timeout_secs = 6", "[limits]\nturn_deadline_secs = 4\n").await;
    env.llm.script([
        calls(&[("t__delete", json!({"path": "/a"})), ("t__delete", json!({"path": "/a2"}))]),
        text("Not deleted, as you said."),
        calls(&[("t__delete", json!({"path": "/b"}))]),
        text("No answer, so I left it."),
    ]);
    let room = env.dm().await;
    env.alice.say(&room, "delete /a").await;
    let notice = wait_notice(&env, &room).await;
    react(&env.alice, &room, &notice, "❌").await;
    let msgs = env.wait_messages(&room, BOT, 3).await;
    assert!(msgs.iter().any(|m| m["content"]["body"] == "Not deleted, as you said."), "{msgs:#?}");
    let refused = results(&env.llm.requests()[1]);
    assert_eq!(code(&refused[0]), "not_approved", "{refused:?}");
    assert_eq!(code(&refused[1]), "not_approved", "{refused:?}");
    assert!(refused[1].contains("not asked again"), "one no is enough for a turn: {refused:?}");
    assert_eq!(approval_notices(&env.alice, &room).await.len(), 1, "asked once in the turn");

    env.alice.say(&room, "delete /b").await;
    let answer = eventually("the answer after the timeout", Duration::from_secs(40), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.into_iter().find(|m| m["content"]["body"] == "No answer, so I left it.")
    })
    .await;
    assert!(answer["content"]["body"].is_string());
    let timed_out = results(&env.llm.requests()[3]);
    assert_eq!(code(&timed_out[0]), "not_approved", "{timed_out:?}");
    assert!(timed_out[0].contains("within 6 s"), "{timed_out:?}");
    assert!(ran(&log, "delete").is_empty(), "nothing was deleted: {:?}", log_lines(&log));
    assert_eq!(approval_notices(&env.alice, &room).await.len(), 2, "a new turn asks again");
    let turns = env.wait_turns(&room, 2).await;
    assert!(turns.iter().all(|t| t.0 == "answered"), "neither turn hit its deadline: {turns:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_waiting_for_approval_resumes_the_wait() {
    let (mut env, _logs, log) = env_with("approval = [\"delete\"]", "").await;
    let room = env.dm().await;
    env.bot.stop().await;
    let mut serve = env.serve_binary().await;
    env.llm.script([calls(&[("t__delete", json!({"path": "/c"}))]), text("Deleted after the restart.")]);
    env.alice.say(&room, "delete /c").await;
    let notice = wait_notice(&env, &room).await;
    serve.start_kill().expect("SIGKILL");
    let _ = serve.wait().await;
    // Decided while richbot is down: the homeserver delivers it after the restart.
    react(&env.alice, &room, &notice, "✅").await;
    let mut serve = env.serve_binary().await;
    let msgs = eventually("the answer", Duration::from_secs(90), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Deleted after the restart.").then_some(m)
    })
    .await;
    assert_eq!(ran(&log, "delete").len(), 1, "{:?}", log_lines(&log));
    assert_eq!(approval_notices(&env.alice, &room).await.len(), 1, "asked once: {msgs:#?}");
    assert_eq!(env.llm.requests().len(), 2, "the call was replayed from the record, not asked again");
    serve.start_kill().expect("kill");
    let _ = serve.wait().await;
    env.start_bot_again().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_overlap_and_the_others_take_turns() {
    let (env, _logs, _log) = env_with("concurrent = [\"slow\"]", "").await;
    let slow = |tool: &str, tag: &str| (tool.to_owned(), json!({"tag": tag, "ms": 700}));
    let (a, b, c, d) =
        (slow("t__slow", "a"), slow("t__slow", "b"), slow("t__slow_serial", "c"), slow("t__slow_serial", "d"));
    env.llm.script([calls(&[(&a.0, a.1), (&b.0, b.1)]), calls(&[(&c.0, c.1), (&d.0, d.1)]), text("timed")]);
    let room = env.dm().await;
    env.alice.say(&room, "race").await;
    env.wait_messages(&room, BOT, 1).await;
    let times = |request: &Value| -> Vec<(String, f64, f64)> {
        results(request)
            .iter()
            .map(|r| {
                let v: Value = serde_json::from_str(r).unwrap_or_else(|_| panic!("a slow result: {r}"));
                (
                    v["tag"].as_str().expect("tag").to_owned(),
                    v["start"].as_f64().expect("start"),
                    v["end"].as_f64().expect("end"),
                )
            })
            .collect()
    };
    let requests = env.llm.requests();
    let together = times(&requests[1]);
    assert_eq!((together[0].0.as_str(), together[1].0.as_str()), ("a", "b"), "results in the model's order");
    assert!(together[1].1 < together[0].2, "concurrent calls overlap: {together:?}");
    let apart = times(&requests[2]);
    assert!(apart[1].1 >= apart[0].2, "calls not listed as concurrent run one after the other: {apart:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_offered_by_persona_user_and_room() {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("mcp.log");
    let extra_toml = format!(
        "{}{}{}[[personas]]\nlocalpart = \"rb_files\"\ndisplay_name = \"Files\"\ntools = [\"t\"]\n",
        stdio_toml("t", &log, &[], "users = [\"@bob:localhost\"]"),
        // Room ids of room version 12 have no server part.
        stdio_toml("u", &log, &[], "rooms = [\"!*\"]"),
        stdio_toml("v", &log, &[], "rooms = [\"!no-such-room:localhost\"]"),
    );
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    env.llm.respond_with(|_| text("ok"));
    let servers_of = |request: &Value| -> Vec<String> {
        let mut s: Vec<String> =
            offered(request).iter().filter_map(|t| t.split_once("__").map(|(s, _)| s.to_owned())).collect();
        s.dedup();
        s
    };
    let asks = [
        (&env.alice, BOT, vec!["u"]),
        (&env.bob, BOT, vec!["t", "u"]),
        (&env.bob, "@rb_files:localhost", vec!["t"]),
        (&env.alice, "@rb_files:localhost", vec![]),
    ];
    for (i, (user, persona, expected)) in asks.into_iter().enumerate() {
        let room = user.create_room(&[persona], true).await;
        env.wait_joined_seen_by(user, &room, persona).await;
        user.say(&room, "what can you do?").await;
        let request =
            eventually("the model is asked", Duration::from_secs(30), || async { env.llm.requests().get(i).cloned() })
                .await;
        assert_eq!(servers_of(&request), expected, "{} asking {persona}", if i % 2 == 0 { "one" } else { "another" });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_names_it_cannot_offer_and_check_reports_each_server() {
    let (mut env, _logs, log) = env_with("", "").await;
    env.bot.stop().await;
    let base = std::fs::read_to_string(&env.config_path).expect("config");
    let long = "a_tool_whose_name_is_far_too_long_to_be_offered_to_any_model";
    let bad = env.dir.path().join("bad.toml");
    std::fs::write(&bad, format!("{base}{}", stdio_toml("files", &log, &["--extra-tool", long], ""))).expect("write");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["serve", "--config", bad.to_str().expect("utf8")])
        .output()
        .await
        .expect("serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve must not start: {stderr}");
    assert!(stderr.contains(&format!("files__{long}")) && stderr.contains("at most 64"), "{stderr}");

    let checked = env.dir.path().join("check.toml");
    std::fs::write(&checked, format!("{base}[[mcp]]\nname = \"gone\"\ncommand = \"/nonexistent/server\"\n"))
        .expect("write");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["check", "--config", checked.to_str().expect("utf8")])
        .output()
        .await
        .expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l.starts_with("ok   mcp t: ") && l.ends_with(" tools")), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with("FAIL mcp gone: ") && l.contains("cannot start /nonexistent/server")),
        "{stdout}"
    );
    assert!(!out.status.success(), "a failing line fails the check");

    // An approval entry that names no tool (here, differently cased) fails both.
    let typo = env.dir.path().join("typo.toml");
    std::fs::write(&typo, format!("{base}{}", stdio_toml("files", &log, &[], "approval = [\"Delete\"]")))
        .expect("write");
    for command in ["serve", "check"] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
            .args([command, "--config", typo.to_str().expect("utf8")])
            .output()
            .await
            .expect(command);
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{command} must fail: {said}");
        assert!(said.contains("approval names \"Delete\""), "{command} names the entry: {said}");
    }
    env.start_bot_again().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_notices_show_every_key_escape_hidden_text_and_refuse_what_cannot_be_shown() {
    let (env, _logs, log) = env_with("approval = [\"delete\"]", "").await;
    let many: serde_json::Map<String, Value> = (0..100).map(|i| (format!("k{i}"), json!(i))).collect();
    let padded = json!({"note": "x".repeat(720), "path": "/srv/share/payroll-2026.xlsx", "why": "tidy\u{202E}xslx"});
    env.llm.script([
        calls(&[("t__delete", Value::Object(many))]),
        calls(&[("t__delete", padded)]),
        text("Left alone."),
    ]);
    let room = env.dm().await;
    env.alice.say(&room, "tidy up").await;
    let notice = wait_notice(&env, &room).await;
    let asked = approval_notices(&env.alice, &room).await.remove(0);
    let body = asked["content"]["body"].as_str().expect("body");
    assert!(body.contains("keys: note, path, why"), "every key, first: {body}");
    assert!(body.contains("path = \"/srv/share/payroll-2026.xlsx\""), "the padded note hides nothing: {body}");
    assert!(body.contains("characters cut"), "the cut is said: {body}");
    assert!(
        body.contains("tidy\\u202Exslx") && !body.contains('\u{202E}'),
        "the override is shown, not obeyed: {body}"
    );
    react(&env.alice, &room, &notice, "❌").await;
    // The notice's edit ("did not allow") and the answer may come in either order.
    eventually("the answer", Duration::from_secs(60), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Left alone.").then_some(())
    })
    .await;
    let too_long = results(&env.llm.requests()[1]);
    assert_eq!(code(&too_long[0]), "invalid_arguments", "{too_long:?}");
    assert!(too_long[0].contains("too long to show for approval"), "{too_long:?}");
    assert_eq!(approval_notices(&env.alice, &room).await.len(), 1, "the call too long to show was never asked");
    assert!(ran(&log, "delete").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_star_gates_every_tool_but_its_exceptions_and_a_tool_listed_after_start_is_gated() {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("mcp.log");
    let extra_toml = format!(
        "{}{}",
        stdio_toml("t", &log, &[], "approval = \"*\"\nno_approval = [\"echo\"]"),
        stdio_toml("u", &log, &[], ""),
    );
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    env.llm.script([
        calls(&[("t__echo", json!({"text": "hi"})), ("u__add_tool", json!({"name": "late"}))]),
        calls(&[("t__delete", json!({"path": "/x"}))]),
        text("Asked first."),
    ]);
    // Later turns call the new tool once it is offered.
    env.llm.respond_with(|request| {
        let last_is_user = request["messages"].as_array().and_then(|m| m.last()).is_some_and(|m| m["role"] == "user");
        if last_is_user && offered(request).iter().any(|t| t == "u__late") {
            calls(&[("u__late", json!({"text": "sneaky"}))])
        } else {
            text("Not yet.")
        }
    });
    let room = env.dm().await;
    env.alice.say(&room, "go").await;
    let notice = wait_notice(&env, &room).await;
    let first = approval_notices(&env.alice, &room).await.remove(0);
    assert!(first["content"]["body"].as_str().is_some_and(|b| b.contains("t__delete")), "{first}");
    assert_eq!(ran(&log, "echo").len(), 1, "the exception ran unasked");
    assert_eq!(ran(&log, "add_tool").len(), 1, "an ungated server's tool ran unasked");
    react(&env.alice, &room, &notice, "❌").await;
    env.wait_turns(&room, 1).await;
    let late = eventually("the tool added after start asks first", Duration::from_secs(60), || async {
        let notices = approval_notices(&env.alice, &room).await;
        if let Some(n) = notices.iter().find(|n| n["content"]["body"].as_str().is_some_and(|b| b.contains("u__late"))) {
            return Some(n.clone());
        }
        env.alice.say(&room, "and now?").await;
        env.wait_turns(&room, env.wait_turns(&room, 1).await.len()).await;
        None
    })
    .await;
    assert!(late["content"]["body"].as_str().is_some_and(|b| b.contains("sneaky")), "{late}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_off_by_a_kill_is_asked_again_if_gated_and_told_as_unknown_if_not() {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("mcp.log");
    let extra_toml =
        format!("{}{}", stdio_toml("t", &log, &[], "approval = [\"hold\"]"), stdio_toml("u", &log, &[], ""));
    let mut env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    let room = env.dm().await;
    env.bot.stop().await;
    let health = format!("http://{}/health", env.bot_addr);
    let began = |tag: &'static str| {
        let log = log.clone();
        async move {
            eventually(&format!("hold {tag} runs"), Duration::from_secs(60), || async {
                log_lines(&log).iter().any(|l| l == &format!("began hold {tag}")).then_some(())
            })
            .await
        }
    };
    let restart = |mut serve: tokio::process::Child| {
        let (config, health) = (env.config_path.clone(), health.clone());
        async move {
            serve.start_kill().expect("SIGKILL");
            let _ = serve.wait().await;
            crate::support::serve_binary(&config, Stdio::inherit(), &health).await
        }
    };

    // Approved, then killed while it runs: asked again on resume, never run on the old yes.
    let serve = env.serve_binary().await;
    env.llm.script([calls(&[("t__hold", json!({"tag": "a", "ms": 120_000}))]), text("Not run again.")]);
    env.alice.say(&room, "hold a").await;
    let notice = wait_notice(&env, &room).await;
    react(&env.alice, &room, &notice, "✅").await;
    began("a").await;
    let serve = restart(serve).await;
    let again = eventually("asked again", Duration::from_secs(90), || async {
        let n = approval_notices(&env.alice, &room).await;
        (n.len() == 2).then(|| n[1]["event_id"].as_str().expect("id").to_owned())
    })
    .await;
    react(&env.alice, &room, &again, "❌").await;
    env.wait_messages(&room, BOT, 1).await;
    let answered = eventually("the answer", Duration::from_secs(60), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Not run again.").then_some(())
    });
    answered.await;
    let not_approved = results(env.llm.requests().last().expect("a request"));
    assert_eq!(code(&not_approved[0]), "not_approved", "{not_approved:?}");
    assert_eq!(log_lines(&log).iter().filter(|l| *l == "began hold a").count(), 1, "it began once");

    // Ungated, killed while it runs: the model hears the outcome is unknown.
    env.llm.script([calls(&[("u__hold", json!({"tag": "b", "ms": 120_000}))]), text("Unknown, then.")]);
    env.alice.say(&room, "hold b").await;
    began("b").await;
    let mut serve = restart(serve).await;
    eventually("the answer", Duration::from_secs(90), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Unknown, then.").then_some(())
    })
    .await;
    let unknown = results(env.llm.requests().last().expect("a request"));
    assert_eq!(code(&unknown[0]), "outcome_unknown", "{unknown:?}");
    assert_eq!(log_lines(&log).iter().filter(|l| *l == "began hold b").count(), 1, "never made again");
    serve.start_kill().expect("kill");
    let _ = serve.wait().await;
    env.start_bot_again().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_model_offers_the_personas_mcp_tools_as_a_turn_would() {
    let (env, _logs, _log) = env_with("", "").await;
    let before = env.llm.requests().len();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["check", "--model", "--config", env.config_path.to_str().expect("utf8")])
        .output()
        .await
        .expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let requests = env.llm.requests();
    let asked = requests.get(before).expect("the model was asked");
    let names: Vec<&str> =
        asked["tools"].as_array().into_iter().flatten().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert!(names.contains(&"rich_send") && names.iter().any(|n| n.starts_with("t__")), "{names:?}");
    let mcp = names.iter().filter(|n| n.starts_with("t__")).count();
    let line = stdout.lines().find(|l| l.contains(" model test-model: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains(&format!("with {mcp} MCP tool(s)")), "{line}");
}
