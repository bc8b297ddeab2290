//! A model per persona: `[[personas]]` `model`, `base_url`, `api_key` and `max_tokens`,
//! each falling back to `[llm]` (but never `[llm]`'s key to another URL), and `richbot
//! check` trying each distinct endpoint once.

use crate::support::llm::text;
use crate::support::{BOT, Env, FakeLlm, Options, User};

async fn ask(env: &Env, user: &User, persona: &str) -> String {
    let room = user.create_room(&[persona], true).await;
    env.wait_joined_seen_by(user, &room, persona).await;
    user.say(&room, "hello").await;
    let answer = env.wait_messages_seen_by(user, &room, persona, 1).await;
    answer[0]["content"]["body"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_persona_talks_to_its_own_model_and_check_tries_each_endpoint_once() {
    let other = FakeLlm::start().await;
    other.set_models(&["other-model"]);
    other.respond_with(|_| text("from the other endpoint"));
    let extra_toml = format!(
        "[[personas]]\nlocalpart = \"rb_other\"\ndisplay_name = \"Other\"\nbase_url = \"{0}\"\nmodel = \"other-model\"\n\
         api_key = \"other-key\"\nmax_tokens = 77\n\n\
         [[personas]]\nlocalpart = \"rb_local\"\ndisplay_name = \"Local\"\nbase_url = \"{0}\"\nmodel = \"other-model\"\n\n\
         [[personas]]\nlocalpart = \"rb_small\"\ndisplay_name = \"Small\"\nmodel = \"small-model\"\nmax_tokens = 55\n\n",
        other.base_url
    );
    let mut env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    env.llm.set_models(&["test-model", "small-model"]);
    env.llm.respond_with(|_| text("from the main endpoint"));

    assert_eq!(ask(&env, &env.alice, BOT).await, "from the main endpoint");
    assert_eq!(ask(&env, &env.alice, "@rb_small:localhost").await, "from the main endpoint");
    assert_eq!(ask(&env, &env.alice, "@rb_other:localhost").await, "from the other endpoint");
    assert_eq!(ask(&env, &env.bob, "@rb_local:localhost").await, "from the other endpoint");

    let main: Vec<(String, u64)> = env
        .llm
        .requests()
        .iter()
        .map(|r| (r["model"].as_str().unwrap_or_default().to_owned(), r["max_tokens"].as_u64().unwrap_or_default()))
        .collect();
    assert_eq!(main, [("test-model".to_owned(), 1024), ("small-model".to_owned(), 55)]);
    let theirs: Vec<(String, u64)> = other
        .requests()
        .iter()
        .map(|r| (r["model"].as_str().unwrap_or_default().to_owned(), r["max_tokens"].as_u64().unwrap_or_default()))
        .collect();
    assert_eq!(theirs, [("other-model".to_owned(), 77), ("other-model".to_owned(), 1024)]);
    assert_eq!(
        other.auth_headers(),
        [Some("Bearer other-key".to_owned()), Some("Bearer".to_owned())],
        "a persona's own key goes to its URL, and [llm]'s key never leaves [llm]'s URL (no key: an empty bearer)"
    );
    assert!(env.llm.auth_headers().iter().all(|h| h.as_deref() == Some("Bearer test-key")));

    env.bot.stop().await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(["check", "--config", env.config_path.to_str().expect("utf8")])
        .output()
        .await
        .expect("check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let llm_lines: Vec<&str> = stdout.lines().filter(|l| l.contains(" llm")).collect();
    assert_eq!(
        llm_lines,
        [
            format!("ok   llm: {} answers and offers test-model, small-model", env.llm.base_url),
            format!("ok   llm for rb_other: {} answers and offers other-model", other.base_url),
            format!("ok   llm for rb_local: {} answers and offers other-model", other.base_url),
        ],
        "{stdout}"
    );
    env.start_bot_again().await;
}
