//! How the test Synapses start: forked from one Python process per test binary that has
//! already imported Synapse (`scripts/synapse-forks.py`). The import was nearly all of a
//! test Synapse's start (1.2 s of CPU of 1.3 s, on this project's 2-core machine); a fork
//! costs about 0.4 s, and the suites start a few hundred. Each child is the real
//! homeserver, Synapse's own `main()` on the test's config, stopped by its PID.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The running fork server: requests go to its stdin, the children's PIDs come back on
/// its stdout, one line each.
struct Forks {
    _server: Child,
    requests: ChildStdin,
    pids: BufReader<ChildStdout>,
}

/// The fork server, started on first use with the venv's Python. It ends when this
/// process does (its stdin closes), and its children then get SIGTERM.
fn forks(python: &Path, script: &Path) -> &'static Mutex<Forks> {
    static FORKS: OnceLock<Mutex<Forks>> = OnceLock::new();
    FORKS.get_or_init(|| {
        let mut server = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start scripts/synapse-forks.py");
        let requests = server.stdin.take().expect("stdin");
        let pids = BufReader::new(server.stdout.take().expect("stdout"));
        Mutex::new(Forks { _server: server, requests, pids })
    })
}

/// Starts a Synapse on `config`, in `dir`, its output appended to `out`; its PID.
pub fn start(python: &Path, script: &Path, config: &Path, dir: &Path, out: &Path) -> u32 {
    let request = serde_json::json!({ "config": config, "dir": dir, "out": out });
    // A test that panicked while holding the lock left the server as it was: usable.
    let mut forks = forks(python, script).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    writeln!(forks.requests, "{request}").and_then(|()| forks.requests.flush()).expect("ask synapse-forks.py");
    let mut line = String::new();
    forks.pids.read_line(&mut line).expect("read synapse-forks.py");
    line.trim().parse().unwrap_or_else(|_| panic!("synapse-forks.py answered {line:?}, not a PID"))
}

/// Whether the process `pid` still runs (the fork server's children are reaped by the
/// kernel as they exit, so a gone one leaves no entry).
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Stops `pid`: SIGTERM, then SIGKILL if it still runs 15 s later; returns once it is
/// gone (or 5 s after the SIGKILL).
pub fn stop(pid: u32) {
    for (signal, wait) in [("-TERM", Duration::from_secs(15)), ("-KILL", Duration::from_secs(5))] {
        let _ = Command::new("kill").args([signal, &pid.to_string()]).status();
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if !alive(pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
