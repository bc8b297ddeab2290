//! Which files are read as text (by type, or by name when the type says nothing), and
//! reading them: UTF-8 only, without NULs, so a binary file named `.txt` is not read.

/// Types other than `text/*` that are text.
const TEXT_TYPES: [&str; 10] = [
    "application/json",
    "application/xml",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/javascript",
    "application/x-sh",
    "application/sql",
    "application/csv",
    "application/x-ndjson",
];

/// Endings of text files, for types that say nothing (`application/octet-stream`).
const TEXT_ENDINGS: [&str; 32] = [
    "txt", "md", "markdown", "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml", "xml", "html", "css", "log", "ini",
    "cfg", "conf", "rs", "py", "js", "ts", "go", "java", "kt", "c", "h", "cpp", "rb", "sh", "sql", "swift", "php",
];

/// Whether a file of `mimetype` named `name` is read as text.
pub fn is_text_like(mimetype: Option<&str>, name: &str) -> bool {
    let mime = mimetype.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if mime.starts_with("text/") || TEXT_TYPES.contains(&mime.as_str()) {
        return true;
    }
    let ending = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    matches!(mime.as_str(), "" | "application/octet-stream")
        && ending.is_some_and(|e| TEXT_ENDINGS.contains(&e.as_str()))
}

/// The text of `bytes`, if it is UTF-8 text.
pub fn read_text(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    (!text.contains('\0')).then(|| text.trim_start_matches('\u{feff}').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_told_by_type_then_by_name_and_read_only_as_utf8() {
        assert!(is_text_like(Some("text/csv"), "x.bin"));
        assert!(is_text_like(Some("application/json; charset=utf-8"), "x"));
        assert!(is_text_like(None, "main.RS"));
        assert!(is_text_like(Some("application/octet-stream"), "notes.md"));
        assert!(!is_text_like(Some("application/pdf"), "paper.txt"), "a stated type wins");
        assert!(!is_text_like(None, "photo.jpg"));
        assert_eq!(read_text("\u{feff}a,b\n1,2".as_bytes()).as_deref(), Some("a,b\n1,2"));
        assert_eq!(read_text(b"a\0b"), None);
        assert_eq!(read_text(&[0xff, 0xfe, 0x41]), None);
    }
}
