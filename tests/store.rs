//! Store queries on a fresh SQLite file: the atomic edit-slot reservation and environment
//! overrides of the config.

use richbot::store::Store;
use serde_json::json;

async fn store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Store::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.expect("open");
    (s, dir)
}

#[tokio::test]
async fn concurrent_edit_slots_are_spaced_and_never_shared() {
    let (s, _d) = store().await;
    let content = json!({});
    let sent = richbot::store::NewSent {
        event_id: "$m",
        room_id: "!r",
        sender: "@bot:x",
        thread_root: None,
        replaces: None,
        content: &content,
        sent_at: 1_000,
        next_edit_at: 3_500,
    };
    s.record_sent(&sent).await.expect("sent");
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.reserve_edit_slot("$m", "@bot:x", 1_000, 2_500).await.expect("slot").expect("owner")
        }));
    }
    let mut slots = Vec::new();
    for t in tasks {
        slots.push(t.await.expect("task"));
    }
    slots.sort_unstable();
    let want: Vec<i64> = (0..10).map(|i| 3_500 + i * 2_500).collect();
    assert_eq!(slots, want);
    assert_eq!(s.reserve_edit_slot("$m", "@other:x", 0, 2_500).await.expect("query"), None, "not the owner");
    assert_eq!(s.reserve_edit_slot("$nope", "@bot:x", 0, 2_500).await.expect("query"), None, "unknown message");
    // A landed write pushes the next slot past its completion time.
    s.edit_landed("$m", &json!({}), 100_000, 2_500).await.expect("landed");
    assert_eq!(s.reserve_edit_slot("$m", "@bot:x", 0, 2_500).await.expect("q"), Some(102_500));
}

#[tokio::test]
async fn reopening_keeps_the_instance_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let a = Store::open(&url).await.expect("open").instance_id().await.expect("id");
    let b = Store::open(&url).await.expect("open").instance_id().await.expect("id");
    assert_eq!(a, b);
    assert_eq!(a.len(), 10);
}

#[test]
fn environment_overrides_config_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("reg.yaml"), "id: r\nurl: null\nas_token: a\nhs_token: h\nsender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@rb_.*:example\\.org'}]\n").expect("reg");
    let toml = "[homeserver]\nurl = \"http://hs\"\nserver_name = \"example.org\"\n[appservice]\nregistration = \"reg.yaml\"\n[llm]\nbase_url = \"http://llm/v1\"\nmodel = \"a\"\n";
    let env = vec![
        ("RICHBOT__LLM__MODEL".to_owned(), "b".to_owned()),
        ("RICHBOT__BOT__MAX_PARALLEL_ROOMS".to_owned(), "3".to_owned()),
        ("RICHBOT__PERSONAS__0__LOCALPART".to_owned(), "rb_x".to_owned()),
        ("OPENAI_API_KEY".to_owned(), "sk-env".to_owned()),
    ];
    let s = richbot::config::from_str(toml, "c.toml".as_ref(), dir.path(), env).expect("valid");
    assert_eq!(s.config.llm.model, "b");
    assert_eq!(s.config.bot.max_parallel_rooms, 3);
    assert_eq!(s.personas[0].localpart, "rb_x");
    assert_eq!(s.api_key.as_deref(), Some("sk-env"));
    assert!(s.allowed("@anyone:example.org") && !s.allowed("@eve:evil.org"), "default: this homeserver only");
    assert!(!format!("{:?}", s.config.llm).contains("sk-"), "secrets are not printed");
    let everything = format!("{s:?}");
    assert!(
        !everything.contains("sk-env") && !everything.contains("hs_token") && !everything.contains("as_token"),
        "{everything}"
    );

    let bad = richbot::config::from_str(
        toml,
        "c.toml".as_ref(),
        dir.path(),
        vec![("RICHBOT__PERSONAS__0__LOCALPART".to_owned(), "mallory".to_owned())],
    );
    let msg = bad.expect_err("outside the namespace").to_string();
    assert!(
        msg.starts_with("personas[0].localpart: @mallory:example.org is outside the registration's user namespace"),
        "{msg}"
    );
}
