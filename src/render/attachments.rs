//! A `file` block posted as a message of its own too (`m.file`): clients that draw no
//! blocks show a file block's name at most, but every client offers an `m.file` for
//! download.

use serde_json::{Map, Value, json};

use super::{Relation, relate};

/// The `m.file` message for a file block: its name, `mxc://` URL, size and type.
pub fn file_message(name: &str, url: &str, size: Option<u64>, mimetype: Option<&str>, rel: Relation<'_>) -> Value {
    let mut info = Map::new();
    if let Some(size) = size {
        info.insert("size".into(), size.into());
    }
    if let Some(mimetype) = mimetype {
        info.insert("mimetype".into(), mimetype.into());
    }
    let mut content = json!({
        "msgtype": "m.file",
        "body": name,
        "filename": name,
        "url": url,
        "info": info,
        "m.mentions": {},
    });
    relate(&mut content, rel);
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_message_names_the_file_and_offers_its_upload() {
        let root = ruma::event_id!("$root");
        let c = file_message(
            "temps.csv",
            "mxc://s/f",
            Some(31),
            Some("text/csv"),
            Relation { reply_to: None, thread: Some(root) },
        );
        assert_eq!(c["msgtype"], "m.file");
        assert_eq!(
            (c["body"].as_str(), c["filename"].as_str(), c["url"].as_str()),
            (Some("temps.csv"), Some("temps.csv"), Some("mxc://s/f"))
        );
        assert_eq!(c["info"], json!({"size": 31, "mimetype": "text/csv"}));
        assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(file_message("a", "mxc://s/a", None, None, Relation::default())["info"], json!({}));
    }
}
