//! Graceful shutdown of the real binary: on SIGTERM richbot takes no new turns, lets the
//! running ones finish within `bot.shutdown_grace_secs`, and exits 0; a turn still running
//! after the grace is left to resume at the next start.

use std::process::Stdio;
use std::time::Duration;

use crate::support::llm::{Step, text};
use crate::support::{BOT, Env, eventually, serve_binary, terminate};

async fn asked(env: &Env, n: usize) {
    eventually("the model is asked", Duration::from_secs(20), || async {
        (env.llm.requests().len() >= n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_turns_finish_then_exits_zero_and_what_is_left_resumes() {
    let mut env = Env::start().await;
    let room = env.dm().await;
    env.bot.stop().await;
    let health = format!("http://{}/health", env.bot_addr);

    let mut serve = env.serve_binary().await;
    env.llm.script([Step::Delay(Duration::from_secs(2), Box::new(text("finished before stopping")))]);
    env.alice.say(&room, "a slow question").await;
    asked(&env, 1).await;
    let status = terminate(&mut serve).await;
    assert!(status.success(), "exit 0 on SIGTERM: {status}");
    let msgs = env.alice.messages_from(&room, BOT).await;
    assert_eq!(msgs.len(), 1, "the running turn finished before the exit: {msgs:#?}");
    assert_eq!(msgs[0]["content"]["body"], "finished before stopping");

    let short = env.dir.path().join("short-grace.toml");
    let config = std::fs::read_to_string(&env.config_path).expect("config");
    std::fs::write(&short, format!("{config}[bot]\nshutdown_grace_secs = 1\n")).expect("write");
    let mut serve = serve_binary(&short, Stdio::inherit(), &health).await;
    env.llm.script([Step::Hang]);
    env.alice.say(&room, "a question the model never answers").await;
    asked(&env, 2).await;
    let status = terminate(&mut serve).await;
    assert!(status.success(), "exit 0 after the grace too: {status}");
    assert_eq!(env.alice.messages_from(&room, BOT).await.len(), 1, "nothing posted for the cut turn yet");

    env.llm.script([text("answered after the restart")]);
    env.start_bot_again().await;
    let msgs = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(msgs[1]["content"]["body"], "answered after the restart");
    assert_eq!(env.wait_turns(&room, 2).await.len(), 2);
}
