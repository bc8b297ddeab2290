//! nheko under Xvfb, driven with xdotool, photographed with ImageMagick's `import`
//! (`../shared`-free: `scripts/screenshots.sh` installs them from Debian). nheko keeps its
//! token in the Secret Service, so it runs in a D-Bus session of its own with an unlocked
//! gnome-keyring, with its own `HOME` and `XDG_RUNTIME_DIR`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The X display the client draws on.
const DISPLAY: &str = ":77";

pub struct Nheko {
    xvfb: Child,
    nheko: Child,
    out: PathBuf,
    _home: tempfile::TempDir,
}

fn pause(ms: u64) -> impl Future<Output = ()> {
    tokio::time::sleep(Duration::from_millis(ms))
}

impl Nheko {
    /// Starts Xvfb and nheko (at its welcome page).
    pub fn start(_hs: &str, out: &Path) -> Self {
        assert!(!display_up(), "display {DISPLAY} is taken (an earlier run's Xvfb?): end it first");
        let xvfb = Command::new("Xvfb")
            .args([DISPLAY, "-screen", "0", "1280x1300x24", "-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb (scripts/screenshots.sh installs it)");
        for _ in 0..100 {
            let up = Command::new("xdpyinfo")
                .args(["-display", DISPLAY])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if up.is_ok_and(|s| s.success()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let home = tempfile::tempdir().expect("nheko's home");
        let run = home.path().join("run");
        std::fs::create_dir_all(&run).expect("runtime dir");
        let _ = Command::new("chmod").arg("700").arg(&run).status();
        let log = std::fs::File::create(out.join("nheko.log")).expect("nheko.log");
        let nheko = Command::new("dbus-run-session")
            .args([
                "--",
                "sh",
                "-c",
                // In the foreground, so it stays in the group and ends with it.
                "echo -n showcase | gnome-keyring-daemon --unlock --components=secrets --foreground >/dev/null & \
                 sleep 1; exec nheko",
            ])
            .process_group(0)
            .env("HOME", home.path())
            .env("XDG_RUNTIME_DIR", &run)
            .env("DISPLAY", DISPLAY)
            .env("QT_QPA_PLATFORM", "xcb")
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("nheko (scripts/screenshots.sh installs it)");
        Self { xvfb, nheko, out: out.to_owned(), _home: home }
    }

    /// Runs xdotool with `args` on the client's display.
    pub fn xdo(&self, args: &[&str]) {
        let status = Command::new("xdotool").args(args).env("DISPLAY", DISPLAY).status().expect("xdotool");
        assert!(status.success(), "xdotool {args:?}");
    }

    pub fn click(&self, x: u32, y: u32) {
        self.xdo(&["mousemove", &x.to_string(), &y.to_string(), "click", "1"]);
    }

    pub fn type_text(&self, text: &str) {
        self.xdo(&["type", "--delay", "20", text]);
    }

    pub fn key(&self, key: &str) {
        self.xdo(&["key", key]);
    }

    /// Saves what the screen shows as `OUT/{name}.png`.
    pub fn shot(&self, name: &str) {
        let path = self.out.join(format!("{name}.png"));
        let status = Command::new("import")
            .args(["-display", DISPLAY, "-window", "root"])
            .arg(&path)
            .status()
            .expect("import (ImageMagick)");
        assert!(status.success(), "screenshot {name}");
        eprintln!("showcase: {}", path.display());
    }

    /// Gives the client time to receive and draw what just arrived.
    pub async fn settle(&self) {
        pause(4_000).await;
    }

    /// Logs in as `user` with `password` on the homeserver at `hs`, and declines the
    /// encryption set-up dialog. The places clicked are nheko 0.11.3's at 1280x1300 (a
    /// screenshot of each step is kept, `login-*.png`, to see where a change of layout
    /// went wrong).
    pub async fn log_in(&self, user: &str, password: &str, hs: &str) {
        pause(6_000).await;
        let window = Command::new("xdotool").args(["search", "--class", "nheko"]).env("DISPLAY", DISPLAY).output();
        let window = window.map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or_default().to_owned());
        self.xdo(&["windowsize", &window.expect("nheko's window"), "1280", "1300"]);
        pause(1_000).await;
        self.click(721, 782); // LOGIN on the welcome page
        pause(2_000).await;
        self.click(639, 622); // Matrix ID
        self.type_text(user);
        // Discovery through .well-known fails on loopback; a homeserver field appears.
        pause(5_000).await;
        self.shot("login-1");
        self.click(639, 633); // Password
        self.type_text(password);
        self.click(639, 746); // Homeserver address
        self.key("ctrl+a");
        self.type_text(hs);
        pause(2_000).await;
        self.shot("login-2");
        self.click(640, 856); // LOGIN
        pause(12_000).await;
        self.shot("login-3");
        self.dismiss_dialog().await; // "Setup Encryption"
        self.shot("login-4");
    }

    /// Cancels the dialog nheko opens about encryption ("Setup Encryption" after the login,
    /// "Activate Encryption" once another of the user's devices set cross-signing up):
    /// the screenshots are of rooms, not of verification.
    pub async fn dismiss_dialog(&self) {
        self.click(1213, 1260); // its Cancel (below the composer's send button otherwise)
        pause(3_000).await;
    }

    /// Opens the `n`-th room of the room list (the most recently active first).
    pub async fn open_room(&self, n: u32) {
        self.click(129, 108 + 53 * n);
        pause(2_000).await;
    }

    /// Ends nheko (its whole process group: the D-Bus session and the keyring) and Xvfb.
    pub fn stop(self) {}
}

impl Drop for Nheko {
    fn drop(&mut self) {
        let group = format!("-{}", self.nheko.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.nheko.wait();
        let _ = self.xvfb.kill();
        let _ = self.xvfb.wait();
    }
}

/// Whether an X server answers on [`DISPLAY`].
fn display_up() -> bool {
    let up = Command::new("xdpyinfo").args(["-display", DISPLAY]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    up.is_ok_and(|s| s.success())
}
