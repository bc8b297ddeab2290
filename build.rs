//! Build facts the binary reports:
//! - Rebuild when a migration is added: `sqlx::migrate!` embeds the folder at compile time,
//!   and cargo does not watch it on its own.
//! - `RICHBOT_GIT_COMMIT`, the commit built from (`richbot --version`, the start-up line),
//!   so an admin's bug report names the exact code. It comes from the environment when set
//!   (a container or package build without `.git` passes it in), else from `git`, else
//!   "unknown". The script reruns when HEAD moves, so a commit never reports the last one.
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-env-changed=RICHBOT_GIT_COMMIT");
    let commit = std::env::var("RICHBOT_GIT_COMMIT").ok().filter(|c| !c.trim().is_empty()).or_else(from_git);
    println!("cargo:rustc-env=RICHBOT_GIT_COMMIT={}", commit.as_deref().unwrap_or("unknown").trim());
}

/// The short commit id of HEAD, watching the files that change when HEAD moves.
fn from_git() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "--git-dir"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let git_dir = Path::new(String::from_utf8(out.stdout).ok()?.trim()).to_path_buf();
    println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
    println!("cargo:rerun-if-changed={}", git_dir.join("packed-refs").display());
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
        && let Some(reference) = head.strip_prefix("ref: ")
    {
        println!("cargo:rerun-if-changed={}", git_dir.join(reference.trim()).display());
    }
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|c| !c.is_empty())
}
