//! The agents' channel's config: every mistake one line naming its key (a short or
//! placeholder token, an unknown persona, a bad pattern), and `check`'s line per client.

use std::path::Path;

const GOOD: &str = "0123456789abcdef0123456789abcdef01";

/// A config around `agents` (TOML), in `dir`, with its registration.
fn config(dir: &Path, agents: &str) -> String {
    std::fs::write(
        dir.join("registration.yaml"),
        "id: richbot\nurl: \"http://127.0.0.1:9009\"\nas_token: as_token_long_enough_to_be_real\nhs_token: hs_token_long_enough_to_be_real\n\
         sender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@richbot_.*:localhost'}]\n",
    )
    .expect("registration");
    format!(
        "[homeserver]\nurl = \"http://127.0.0.1:9\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"registration.yaml\"\n\
         listen = \"127.0.0.1:9009\"\n[database]\nurl = \"sqlite://richbot.db\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n{agents}"
    )
}

#[test]
fn agents_config_mistakes_fail_validation_one_line_each_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = config(
        dir.path(),
        &format!(
            "[agents]\nlisten = \"nowhere\"\nidempotency_hours = 0\n\
             [[agents.clients]]\nname = \"ci\"\ntoken = \"short\"\npersona = \"richbot\"\n\
             [[agents.clients]]\nname = \"ci\"\ntoken = \"changeme-changeme-changeme-changeme\"\npersona = \"ghost\"\n\
             [[agents.clients]]\nname = \"bad name\"\ntoken_file = \"missing.token\"\npersona = \"richbot\"\nrooms = [\"ops\"]\nusers = [\"alice\"]\nwrites_per_minute = 0\n\
             [[agents.clients]]\nname = \"both\"\ntoken = \"{GOOD}\"\ntoken_file = \"x\"\npersona = \"richbot\"\n\
             [[agents.clients]]\nname = \"none\"\npersona = \"richbot\"\n"
        ),
    );
    let path = dir.path().join("richbot.toml");
    let e = richbot::config::from_str(&text, &path, dir.path(), std::iter::empty()).expect_err("invalid").to_string();
    let missing = dir.path().join("missing.token");
    for want in [
        "agents.listen: must be an address like 127.0.0.1:9300 (got \"nowhere\")".to_owned(),
        "agents.idempotency_hours: must be 1-8760".to_owned(),
        "agents.clients[0].token: the token must be at least 32 characters (make one with: openssl rand -hex 32)"
            .to_owned(),
        "agents.clients[1].name: \"ci\" is used by two clients".to_owned(),
        "agents.clients[1].token: the token is a placeholder; make one with: openssl rand -hex 32".to_owned(),
        "agents.clients[1].persona: \"ghost\" is not a persona's localpart (personas: richbot)".to_owned(),
        "agents.clients[2].name: \"bad name\" must be 1-32 of A-Z a-z 0-9 _ -".to_owned(),
        format!(
            "agents.clients[2].token_file: cannot read {}: No such file or directory (os error 2)",
            missing.display()
        ),
        "agents.clients[2].rooms[0]: \"ops\" must be a room id (!...), an alias (#...) or \"!*\"".to_owned(),
        "agents.clients[2].users[0]: \"alice\" must be a user id (@...) or a pattern like \"*:example.org\"".to_owned(),
        "agents.clients[2].writes_per_minute: must be at least 1".to_owned(),
        "agents.clients[3]: set token or token_file, not both".to_owned(),
        "agents.clients[4].token: set token (at least 32 characters) or token_file".to_owned(),
    ] {
        assert!(e.lines().any(|l| l == want), "want {want:?} in:\n{e}");
    }
    assert_eq!(e.lines().count(), 13, "one line per mistake:\n{e}");
    assert!(!e.contains("changeme"), "tokens are never quoted:\n{e}");
}

#[tokio::test]
async fn check_has_a_line_per_agent_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ci.token"), format!("{GOOD}\n")).expect("token");
    let text = config(
        dir.path(),
        "[agents]\nlisten = \"127.0.0.1:9300\"\n\
         [[agents.clients]]\nname = \"ci\"\ntoken_file = \"ci.token\"\npersona = \"richbot\"\nrooms = [\"#ops:localhost\", \"!*\"]\nusers = [\"*:localhost\"]\n",
    );
    let path = dir.path().join("richbot.toml");
    let settings = richbot::config::from_str(&text, &path, dir.path(), std::iter::empty()).expect("valid");
    assert_eq!(settings.agents.len(), 1);
    assert_eq!(settings.agents[0].token, GOOD, "the token file's line, trimmed");
    assert!(!format!("{settings:?}").contains(GOOD), "Debug leaves the token out");
    let lines = richbot::check::run(&settings, false).await;
    let line = lines.iter().find(|l| l.name == "agents client ci").expect("a line for the client").to_string();
    assert_eq!(
        line,
        "ok   agents client ci: posts as @richbot:localhost in rooms #ops:localhost, !*; directly to *:localhost; \
         30 writes a minute; on http://127.0.0.1:9300"
    );
}
