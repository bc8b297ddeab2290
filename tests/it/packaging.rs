//! The packaging: the systemd unit passes `systemd-analyze verify`, and the Containerfile
//! stays conventional (official bases, non-root, /data, a health check that works). No
//! image registry is reachable from the test machines, so the image itself is not built
//! here: what the runtime stage relies on is checked instead (the binary needs only what
//! Debian's slim image has, and the health-check command answers against a running
//! richbot).

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `command` from Debian's `package`, installed (as root, by apt) when missing.
fn ensure(command: &str, package: &str) {
    let found = |c: &str| {
        Command::new("sh").args(["-c", &format!("command -v {c}")]).output().is_ok_and(|o| o.status.success())
    };
    if found(command) {
        return;
    }
    let status = Command::new("sh")
        .args([
            "-c",
            &format!(
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq {package} >/dev/null"
            ),
        ])
        .status()
        .expect("apt-get");
    assert!(status.success() && found(command), "{command} is missing and installing {package} failed");
}

#[test]
fn the_systemd_unit_passes_systemd_analyze_verify() {
    ensure("systemd-analyze", "systemd");
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = std::fs::read_to_string(root().join("contrib/richbot.service")).expect("unit");
    assert!(unit.contains("ExecStart=/usr/local/bin/richbot serve --config /etc/richbot/richbot.toml"));
    for hardening in
        ["NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "User=richbot"]
    {
        assert!(unit.lines().any(|l| l == hardening), "{hardening}");
    }
    // verify checks that the command exists: point it at the binary under test.
    let path = dir.path().join("richbot.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/richbot", env!("CARGO_BIN_EXE_richbot"))).expect("write");
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path).output().expect("verify");
    let said = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = said.lines().filter(|l| !l.contains("/usr/lib/systemd") && !l.trim().is_empty()).collect();
    assert!(out.status.success() && said.is_empty(), "systemd-analyze verify: {said:#?}");
}

fn containerfile() -> String {
    std::fs::read_to_string(root().join("Containerfile")).expect("Containerfile")
}

#[test]
fn the_containerfile_is_multi_stage_on_official_bases_and_runs_as_a_non_root_user() {
    let file = containerfile();
    let from: Vec<&str> = file.lines().filter_map(|l| l.strip_prefix("FROM ")).collect();
    assert_eq!(from, ["docker.io/library/rust:1-slim-bookworm AS build", "docker.io/library/debian:stable-slim"]);
    for line in ["USER richbot:richbot", "WORKDIR /data", "VOLUME [\"/data\"]", "ENV RICHBOT_CONFIG=/data/richbot.toml"]
    {
        assert!(file.lines().any(|l| l == line), "{line}");
    }
    // Everything the manifest builds from is copied into the build stage.
    for needed in ["Cargo.toml", "Cargo.lock", "build.rs", "src", "migrations", "benches"] {
        assert!(root().join(needed).exists());
        assert!(
            file.lines().any(|l| l.starts_with("COPY ") && l.split_whitespace().any(|w| w == needed)),
            "COPY {needed}"
        );
    }
}

#[test]
fn the_binary_needs_only_what_debians_slim_image_has() {
    let out = Command::new("ldd").arg(env!("CARGO_BIN_EXE_richbot")).output().expect("ldd");
    let libs: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|l| !l.starts_with("linux-vdso") && !l.contains("ld-linux"))
        .collect();
    let slim = ["libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1"];
    assert!(!libs.is_empty(), "ldd read the binary");
    for lib in &libs {
        assert!(slim.contains(&lib.as_str()), "{lib} is not in debian:stable-slim (libc6, libgcc-s1)");
    }
}

/// The HEALTHCHECK command, run against `port` instead of 9009.
fn health_check(port: u16) -> bool {
    let file = containerfile();
    let line = file.split("HEALTHCHECK").nth(1).and_then(|rest| rest.split("CMD ").nth(1)).expect("a HEALTHCHECK CMD");
    let json: String = line.lines().next().expect("one line").to_owned();
    let argv: Vec<String> = serde_json::from_str(&json).expect("the CMD is a JSON array");
    assert!(argv[2].contains("/health"));
    let script = argv[2].replace("9009", &port.to_string());
    Command::new(&argv[0]).args([&argv[1], &script]).status().is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_containers_health_check_passes_on_a_running_richbot_and_fails_without_one() {
    let env = crate::support::Env::start().await;
    let port = env.bot_addr.port();
    assert!(tokio::task::spawn_blocking(move || health_check(port)).await.expect("join"));
    let closed = crate::support::synapse::free_port();
    assert!(!tokio::task::spawn_blocking(move || health_check(closed)).await.expect("join"));
}
