//! Files richbot writes hold secrets (tokens, keys) or are read by a homeserver with them:
//! they are created owner-only (0600), never through a symlink, and never over an existing
//! file unless the admin says `--force`.

use std::io::Write;
use std::path::Path;

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
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(|source| Error::Write { path: shown, source })
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
