//! Where a payload rides in event content. Writers use exactly one key (configurable);
//! readers accept both, the newer key first, and for an edit look in `m.new_content` first.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key every deployed renderer reads (the default writer key).
pub const KEY_MTRIX: &str = "com.ianm.mtrix";
/// The newer key.
pub const KEY_MXBLOCKS: &str = "com.talaagent.mxblocks";
/// Reader order: the first key present wins.
pub const READ_ORDER: [&str; 2] = [KEY_MXBLOCKS, KEY_MTRIX];

/// Which content key this deployment writes payloads under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum WriterKey {
    #[default]
    #[serde(rename = "com.ianm.mtrix")]
    Mtrix,
    #[serde(rename = "com.talaagent.mxblocks")]
    Mxblocks,
}

impl WriterKey {
    pub fn as_str(self) -> &'static str {
        match self {
            WriterKey::Mtrix => KEY_MTRIX,
            WriterKey::Mxblocks => KEY_MXBLOCKS,
        }
    }

    /// `<key>.used`: on a message a user sent by pressing a `send` button with an id.
    pub fn used_key(self) -> String {
        format!("{}.used", self.as_str())
    }
}

/// The payload in an event's content, if any: `m.new_content` first (edits), then the
/// top level; in each, `com.talaagent.mxblocks` before `com.ianm.mtrix`.
pub fn read_payload(content: &Value) -> Option<&Value> {
    let new_content = content.get("m.new_content");
    new_content.into_iter().chain(std::iter::once(content)).find_map(|c| READ_ORDER.iter().find_map(|k| c.get(*k)))
}

/// The button id a message carries when a user sent it by pressing a `send` button.
pub fn read_used_id(content: &Value) -> Option<&str> {
    READ_ORDER.iter().find_map(|k| content.get(format!("{k}.used"))?.get("id")?.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn readers_prefer_new_content_then_the_newer_key() {
        let both = json!({"com.ianm.mtrix": {"v": 1, "n": "old"}, "com.talaagent.mxblocks": {"v": 1, "n": "new"}});
        assert_eq!(read_payload(&both).and_then(|p| p.get("n")), Some(&json!("new")));
        let only_old = json!({"com.ianm.mtrix": {"n": "old"}});
        assert_eq!(read_payload(&only_old).and_then(|p| p.get("n")), Some(&json!("old")));
        let edit = json!({"com.ianm.mtrix": {"n": "top"}, "m.new_content": {"com.ianm.mtrix": {"n": "inner"}}});
        assert_eq!(read_payload(&edit).and_then(|p| p.get("n")), Some(&json!("inner")));
        assert_eq!(read_payload(&json!({"body": "hi"})), None);
    }

    #[test]
    fn used_ids_are_read_under_either_prefix() {
        assert_eq!(read_used_id(&json!({"com.ianm.mtrix.used": {"id": "yes"}})), Some("yes"));
        assert_eq!(read_used_id(&json!({"com.talaagent.mxblocks.used": {"id": "no"}})), Some("no"));
        assert_eq!(WriterKey::Mxblocks.used_key(), "com.talaagent.mxblocks.used");
    }
}
