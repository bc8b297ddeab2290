//! richbot's own messages: `m.notice`s (a status, an error, a limit, an approval
//! request), which bots, richbot included, never answer.

use ruma::EventId;
use serde_json::{Value, json};

use super::{Error, Message, Relation, edit, message, text};
use crate::blocks::WriterKey;

/// richbot's own status, error or limit message: an `m.notice` (which bots do not
/// answer), optionally in a thread.
pub fn notice(markdown: &str, thread: Option<&EventId>) -> Result<Value, Error> {
    let mut content = text(markdown, thread)?;
    content["msgtype"] = json!("m.notice");
    Ok(content)
}

/// richbot's own notice with blocks (an approval request): like [`message`], as an
/// `m.notice`.
pub fn rich_notice(fallback: &str, payload: &Value, key: WriterKey, thread: Option<&EventId>) -> Result<Value, Error> {
    let mut content = message(
        Message { payload: Some(payload), key, ..Message::text(fallback) },
        Relation { reply_to: None, thread },
    )?;
    content["msgtype"] = json!("m.notice");
    Ok(content)
}

/// An edit of richbot's own notice to plain text (an approval request once decided: its
/// buttons go).
pub fn notice_edit(original: &EventId, markdown: &str) -> Result<Value, Error> {
    let mut content = edit(original, Message::text(markdown))?;
    content["msgtype"] = json!("m.notice");
    content["m.new_content"]["msgtype"] = json!("m.notice");
    Ok(content)
}
