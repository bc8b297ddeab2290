//! The HTTP edge under a flood of idle connections, without the homeserver token, against
//! the real binary with the open-file limit a default unit has (1,024): 1,100 half-sent
//! requests are all closed (over the connection cap at once, the rest when their head is
//! not done within 10 s), and meanwhile a member's new DM is joined and answered.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::llm::text;
use crate::support::{BOT, Env, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_half_requests_past_the_descriptor_limit_are_closed_while_a_dm_is_answered() {
    let mut env = Env::start().await;
    env.bot.stop().await;
    let health = format!("http://{}/health", env.bot_addr);
    let mut serve = crate::support::serve_binary_with_nofile(&env.config_path, Stdio::inherit(), &health, 1024).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flood.py");
    let port = env.bot_addr.port().to_string();
    let mut flood = Command::new("python3")
        .arg(&script)
        .args(["127.0.0.1", &port, "1100", "90"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the flood");
    let mut out = BufReader::new(flood.stdout.take().expect("stdout"));
    let said = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        out.read_line(&mut line).expect("ready");
        assert_eq!(line.trim(), "ready");
        line.clear();
        out.read_line(&mut line).expect("count");
        line.trim().to_owned()
    });

    env.llm.script([text("Still here.")]);
    let room = env.alice.create_room(&[BOT], true).await;
    eventually("the persona joins the new DM", Duration::from_secs(90), || async {
        env.alice.joined_members(&room).await.iter().any(|u| u == BOT).then_some(())
    })
    .await;
    env.alice.say(&room, "are you there?").await;
    eventually("the answer", Duration::from_secs(90), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Still here.").then_some(())
    })
    .await;
    let closed = said.await.expect("the flood's count");
    assert_eq!(closed, "1100", "every idle half-request was closed");
    let _ = flood.wait();
    serve.start_kill().expect("kill");
    let _ = serve.wait().await;
    env.start_bot_again().await;
}
