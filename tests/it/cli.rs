//! The `richbot` binary's offline commands: `blocks check`, `generate-registration`, and a
//! bad config failing with one line per problem.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn richbot(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_richbot"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write");
    child.wait_with_output().expect("wait")
}

#[test]
fn blocks_check_prints_canonical_json_or_the_error_line() {
    let ok =
        richbot(&["blocks", "check"], r#"{"v": 1, "blocks": [{"type": "weather", "location": "L", "temp": 21.5}]}"#);
    assert!(ok.status.success());
    let out: serde_json::Value = serde_json::from_slice(&ok.stdout).expect("json");
    assert_eq!(out["blocks"][0]["temp"], "21.5");

    let bad = richbot(&["blocks", "check", "-"], r#"{"v": 1, "blocks": [{"type": "weather", "location": "L"}]}"#);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&bad.stderr).trim(), "blocks[0] (weather): missing required field \"temp\"");
    assert!(bad.stdout.is_empty());

    let tool = richbot(
        &["blocks", "check", "--tool", "rich_send"],
        r#"{"payload": {"v": 1, "blocks": [{"type": "math", "tex": "x^2"}]}}"#,
    );
    assert!(tool.status.success(), "{}", String::from_utf8_lossy(&tool.stderr));
    let out: serde_json::Value = serde_json::from_slice(&tool.stdout).expect("json");
    assert_eq!(out["fallback"], "x^2");

    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/02-table.json");
    assert!(richbot(&["blocks", "check", fixture], "").status.success());
}

#[test]
fn generate_registration_refuses_to_overwrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("registration.yaml");
    let out_s = out.to_str().expect("utf8");
    let args =
        ["generate-registration", "--url", "http://127.0.0.1:9009", "--server-name", "example.org", "--out", out_s];
    assert!(richbot(&args, "").status.success());
    let first = std::fs::read_to_string(&out).expect("written");
    let again = richbot(&args, "");
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&out).expect("kept"), first);
}

#[test]
fn a_bad_config_names_each_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("richbot.toml");
    std::fs::write(&config, "[homeserver]\nurl = \"ftp://x\"\nserver_name = \"example.org\"\n[appservice]\nregistration = \"missing.yaml\"\nlisten = \"nowhere\"\n[llm]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"\"\n").expect("write");
    let out = richbot(&["serve", "--config", config.to_str().expect("utf8")], "");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for key in ["homeserver.url:", "appservice.listen:", "llm.model:", "appservice.registration:"] {
        assert!(err.lines().any(|l| l.starts_with(key)), "{key} in:\n{err}");
    }
}

#[test]
fn generate_registration_from_a_config_matches_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("richbot.toml");
    std::fs::write(
        &config,
        "[homeserver]\nurl = \"http://127.0.0.1:8008\"\nserver_name = \"chat.example.org\"\n[appservice]\n\
         registration = \"reg/registration.yaml\"\nlisten = \"0.0.0.0:9100\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
    )
    .expect("config");
    std::fs::create_dir_all(dir.path().join("reg")).expect("folder");
    let out = richbot(&["generate-registration", "--config", config.to_str().expect("utf8")], "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = dir.path().join("reg/registration.yaml");
    let reg: ruma::api::appservice::Registration =
        serde_norway::from_str(&std::fs::read_to_string(&written).expect("written")).expect("valid");
    assert_eq!(
        reg.url.as_deref(),
        Some("http://127.0.0.1:9100"),
        "the homeserver reaches a wildcard listen on loopback"
    );
    assert_eq!(reg.namespaces.users[0].regex, "@richbot_.*:chat\\.example\\.org");
    // The pair validates: same server, same address.
    richbot::config::load(&config, std::iter::empty()).expect("config and registration agree");
    let again = richbot(&["generate-registration", "--config", config.to_str().expect("utf8")], "");
    assert_eq!(again.status.code(), Some(1), "never overwritten without --force");
}

#[test]
fn a_config_syntax_error_names_the_line_never_the_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("richbot.toml");
    std::fs::write(&config, "[homeserver]\nurl = \"http://hs\"\n[llm]\napi_key = \"sk-very-secret\nmodel = \"m\"\n")
        .expect("write");
    let out = richbot(&["check", "--config", config.to_str().expect("utf8")], "");
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("richbot.toml: line 4, column"), "{said}");
    assert!(!said.contains("sk-very-secret"), "the key is never echoed: {said}");
}

#[test]
fn check_warns_when_a_config_holding_a_key_is_readable_by_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("registration.yaml"),
        "id: r\nurl: \"http://127.0.0.1:9009\"\nas_token: as_token_long_enough_to_be_real\nhs_token: hs_token_long_enough_to_be_real\nsender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@richbot_.*:localhost'}]\n",
    )
    .expect("registration");
    let config = dir.path().join("richbot.toml");
    std::fs::write(
        &config,
        "[homeserver]\nurl = \"http://127.0.0.1:9\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"registration.yaml\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key = \"sk-x\"\n",
    )
    .expect("config");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let out = richbot(&["check", "--config", config.to_str().expect("utf8")], "");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("WARN config:") && said.contains("readable by other users; chmod 600"), "{said}");
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let out = richbot(&["check", "--config", config.to_str().expect("utf8")], "");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(!said.contains("readable by other users"), "quiet once private: {said}");
    }
}

#[test]
fn no_config_value_or_url_credential_is_echoed_by_any_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("richbot.toml");
    // A value of the wrong type: generate-registration reads the config too.
    std::fs::write(
        &config,
        "[homeserver]\nurl = \"http://127.0.0.1:8008\"\nserver_name = \"x.org\"\n[appservice]\nregistration = \"r.yaml\"\n\
         listen = \"127.0.0.1:9100\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key = \"k\"\ntimeout_secs = \"sk-typed-secret\"\n",
    )
    .expect("config");
    let out = richbot(&["generate-registration", "--config", config.to_str().expect("utf8")], "");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(!said.contains("sk-typed-secret") && said.contains("line 11"), "{said}");
    // URLs with credentials, each invalid: named, their secrets masked.
    std::fs::write(
        &config,
        "[homeserver]\nurl = \"ftp://hs:hs-secret@h\"\nserver_name = \"x.org\"\n[appservice]\nregistration = \"r.yaml\"\n\
         listen = \"127.0.0.1:9100\"\n\
         [llm]\nbase_url = \"ftp://u:llm-secret@h/v1?key=q-secret\"\nmodel = \"m\"\n\
         [[personas]]\nlocalpart = \"richbot\"\nbase_url = \"gopher://p:persona-secret@h\"\n",
    )
    .expect("config");
    let out = richbot(&["check", "--config", config.to_str().expect("utf8")], "");
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    for secret in ["hs-secret", "llm-secret", "q-secret", "persona-secret"] {
        assert!(!said.contains(secret), "{secret} in: {said}");
    }
    assert!(said.contains("homeserver.url") && said.contains("ftp://hs:***@h"), "{said}");
}

#[test]
fn generate_registration_refuses_a_server_name_that_is_not_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_path = dir.path().join("registration.yaml");
    let out_s = out_path.to_str().expect("utf8");
    let args =
        ["generate-registration", "--url", "http://127.0.0.1:9009", "--server-name", "exa'mple.org", "--out", out_s];
    let out = richbot(&args, "");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server-name: not a Matrix server name"));
    assert!(!out_path.exists(), "nothing written");
}

/// `--version` names the release and the commit built from, so a bug report says which
/// code ran: the commit is this checkout's HEAD (the suite builds from it).
#[test]
fn version_names_the_release_and_the_commit() {
    let out = richbot(&["--version"], "");
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let commit = head.unwrap_or_else(|| "unknown".into());
    assert_eq!(line, format!("richbot {} (commit {commit})", env!("CARGO_PKG_VERSION")));
}
