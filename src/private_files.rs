//! Files richbot writes hold secrets (tokens, keys) or are read by a homeserver with them:
//! they are created owner-only (0600), never through a symlink, and never over an existing
//! file unless the admin says `--force`. The lock file and the database are opened the same
//! way: a symlink in their place is refused (`O_NOFOLLOW`), never followed and truncated.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} exists; pass --force to overwrite it")]
    Exists(String),
    #[error("{0} is a symbolic link; richbot writes only regular files")]
    Symlink(String),
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
}

/// Whether `path` exists as anything, a dangling symlink included.
pub fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Writes `text` to a new file at `path`, mode 0600. An existing file is an error unless
/// `force` (then it is replaced); a symlink always is.
pub fn write_private(path: &Path, text: &str, force: bool) -> Result<(), Error> {
    let shown = path.display().to_string();
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => return Err(Error::Symlink(shown)),
        Ok(_) if !force => return Err(Error::Exists(shown)),
        Ok(_) => std::fs::remove_file(path).map_err(|source| Error::Write { path: shown.clone(), source })?,
        Err(_) => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|source| Error::Write { path: shown.clone(), source })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| Error::Write { path: shown, source })
}

/// Another process holds the lock.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "{path} is locked by another richbot (process {holder}) using the same database; stop it first, or give this one its own database.url"
    )]
    Held { path: String, holder: String },
    #[error("cannot lock {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{0} is a symbolic link; richbot opens only regular files there")]
    Symlink(String),
}

/// Opens `options` at `path` without following a symlink there (the open fails instead).
pub fn no_follow(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(options, libc::O_NOFOLLOW);
    options
}

/// Whether `path` is a symlink (dangling or not).
pub fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// An exclusive lock on a file, held until dropped; the OS releases it if the process dies.
#[derive(Debug)]
pub struct Lock {
    _file: std::fs::File,
}

/// How long a lock that names this very process as its holder is asked again. One this
/// process dropped a moment ago is still held while a child it is spawning (any thread's)
/// is between its fork and its exec: a `flock` lock belongs to the open file, which the
/// child's copy of the descriptor shares until the exec closes it. Only a process that
/// runs richbot twice (the tests, restarting it in-process) meets this; another process's
/// lock is refused at once.
const OWN_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Takes the lock file at `path` (created 0600 if missing) and writes this process's id
/// into it, or names the process that holds it.
pub fn lock(path: &Path) -> Result<Lock, LockError> {
    let shown = path.display().to_string();
    let io = |source| LockError::Io { path: shown.clone(), source };
    if is_symlink(path) {
        return Err(LockError::Symlink(shown));
    }
    let mut options = std::fs::OpenOptions::new();
    no_follow(options.read(true).write(true).create(true).truncate(false));
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io)?;
    let deadline = Instant::now() + OWN_LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(path).unwrap_or_default().trim().to_owned();
                if holder == std::process::id().to_string() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                return Err(LockError::Held {
                    path: shown,
                    holder: if holder.is_empty() { "unknown".into() } else { holder },
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
    }
    file.set_len(0).map_err(io)?;
    file.write_all(std::process::id().to_string().as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(Lock { _file: file })
}

/// Whether a file can be read by users other than its owner (unix modes; false elsewhere).
pub fn readable_by_others(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o044 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_held_once_and_names_its_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.lock");
        let first = lock(&path).expect("first");
        match lock(&path) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, std::process::id().to_string()),
            other => panic!("expected the lock to be held: {other:?}"),
        }
        drop(first);
        lock(&path).expect("free again once dropped");
    }

    #[test]
    fn a_lock_this_process_dropped_is_waited_for_while_a_spawning_childs_copy_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db.lock");
        let first = lock(&path).expect("first");
        // The copy of the descriptor a child holds between its fork and its exec.
        let copy = first._file.try_clone().expect("dup");
        drop(first);
        let exec = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(copy);
        });
        lock(&path).expect("taken once the copy is closed");
        exec.join().expect("the copy closed");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_lock_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("precious.txt");
        std::fs::write(&target, "keep me").expect("write");
        let link = dir.path().join("db.lock");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        assert!(matches!(lock(&link), Err(LockError::Symlink(_))));
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep me", "not truncated");
    }

    #[test]
    fn private_files_are_0600_never_through_a_symlink_and_never_overwritten_unforced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret.yaml");
        write_private(&path, "one", false).expect("new file");
        assert!(!readable_by_others(&path));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        }
        assert!(matches!(write_private(&path, "two", false), Err(Error::Exists(_))));
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "one");
        write_private(&path, "two", true).expect("forced");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "two");

        #[cfg(unix)]
        {
            let link = dir.path().join("link.yaml");
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).expect("dangling link");
            assert!(matches!(write_private(&link, "x", true), Err(Error::Symlink(_))));
            assert!(!dir.path().join("nowhere").exists(), "nothing written through the link");
        }
    }
}
