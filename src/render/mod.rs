//! Message content, built without I/O: CommonMark rendered to HTML and sanitized to what
//! Matrix clients allow, the payload under the writer key, relations (reply, thread,
//! replace), `m.mentions: {}` so the bot pings nobody by accident, and every number made
//! Matrix-safe. Sizes are checked here, where the final content exists.

mod live;
mod notice;
pub use live::{LIVE, fits_as_edit, live};
pub use notice::{notice, notice_edit, rich_notice};

use std::collections::HashSet;
use std::sync::LazyLock;

use pulldown_cmark::{Options, Parser, html};
use ruma::EventId;
use serde_json::{Value, json};

use crate::blocks::{BlockError, WriterKey, canonicalize};

/// Largest event content we send: Matrix caps a whole event at 65,536 bytes, and the
/// envelope (ids, signatures, hashes) needs the rest.
pub const MAX_CONTENT_BYTES: usize = 60 * 1024;

/// Content that cannot be sent as built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "the message would be {0} bytes; at most {MAX_CONTENT_BYTES} fit in one Matrix event (an edit carries it twice): shorten the fallback or the payload"
    )]
    TooLarge(usize),
    #[error("{0}")]
    Numbers(#[from] BlockError),
}

/// Where a new message hangs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Relation<'a> {
    pub reply_to: Option<&'a EventId>,
    pub thread: Option<&'a EventId>,
}

/// Tags Matrix clients render (spec: `m.room.message` `org.matrix.custom.html`).
const TAGS: &[&str] = &[
    "font",
    "del",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "p",
    "a",
    "ul",
    "ol",
    "sup",
    "sub",
    "li",
    "b",
    "i",
    "u",
    "strong",
    "em",
    "s",
    "strike",
    "code",
    "hr",
    "br",
    "div",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "caption",
    "pre",
    "span",
    "details",
    "summary",
];

static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut b = ammonia::Builder::empty();
    b.tags(TAGS.iter().copied().collect::<HashSet<_>>())
        .add_tag_attributes("a", ["href"])
        .add_tag_attributes("code", ["class"])
        .add_tag_attributes("ol", ["start"])
        .add_tag_attributes("span", ["data-mx-maths"])
        .add_tag_attributes("div", ["data-mx-maths"])
        .url_schemes(["https", "http", "mailto", "matrix"].into_iter().collect())
        .link_rel(Some("noopener"));
    b
});

/// CommonMark to sanitized HTML.
pub fn markdown_html(markdown: &str) -> String {
    let mut out = String::new();
    let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    html::push_html(&mut out, Parser::new_ext(markdown, opts));
    SANITIZER.clean(&out).to_string().trim_end().to_owned()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The body part of a message: `msgtype`, `body`, HTML, mentions, and the payload.
fn message_body(fallback: &str, payload: Option<&Value>, key: WriterKey, math: &[&str]) -> Value {
    let html = if !math.is_empty() && fallback == math.join("\n\n") {
        // A math-only message: MSC2191 markup, the TeX itself as the body.
        math.iter().map(|t| format!("<div data-mx-maths=\"{0}\"><code>{0}</code></div>", escape(t))).collect()
    } else {
        markdown_html(fallback)
    };
    let mut content = json!({
        "msgtype": "m.text",
        "body": fallback,
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        "m.mentions": {},
    });
    if let Some(p) = payload {
        content[key.as_str()] = p.clone();
    }
    content
}

fn finish(mut content: Value) -> Result<Value, Error> {
    canonicalize(&mut content, "")?;
    let size = content.to_string().len();
    if size > MAX_CONTENT_BYTES {
        return Err(Error::TooLarge(size));
    }
    Ok(content)
}

/// A new message (rich when `payload` is given).
pub fn message(
    fallback: &str,
    payload: Option<&Value>,
    key: WriterKey,
    math: &[&str],
    rel: Relation<'_>,
) -> Result<Value, Error> {
    let mut content = message_body(fallback, payload, key, math);
    match (rel.thread, rel.reply_to) {
        (Some(root), reply) => {
            content["m.relates_to"] = json!({
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": reply.is_none(),
                "m.in_reply_to": {"event_id": reply.unwrap_or(root)},
            });
        }
        (None, Some(reply)) => content["m.relates_to"] = json!({"m.in_reply_to": {"event_id": reply}}),
        (None, None) => {}
    }
    finish(content)
}

/// An edit (`m.replace`) of `original` to the new fallback and payload.
pub fn edit(
    original: &EventId,
    fallback: &str,
    payload: Option<&Value>,
    key: WriterKey,
    math: &[&str],
) -> Result<Value, Error> {
    let new_content = message_body(fallback, payload, key, math);
    let content = json!({
        "msgtype": "m.text",
        "body": format!("* {fallback}"),
        "format": "org.matrix.custom.html",
        "formatted_body": format!("* {}", new_content["formatted_body"].as_str().unwrap_or_default()),
        "m.mentions": {},
        "m.new_content": new_content,
        "m.relates_to": {"rel_type": "m.replace", "event_id": original},
    });
    finish(content)
}

/// A plain text answer (CommonMark), optionally in a thread.
pub fn text(markdown: &str, thread: Option<&EventId>) -> Result<Value, Error> {
    text_in(markdown, Relation { reply_to: None, thread })
}

/// A plain text answer (CommonMark), related as `rel` says (a reply, a thread).
pub fn text_in(markdown: &str, rel: Relation<'_>) -> Result<Value, Error> {
    message(markdown, None, WriterKey::default(), &[], rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruma::event_id;

    #[test]
    fn notices_are_m_notice() {
        let n = notice("paused", None).expect("fits");
        assert_eq!(n["msgtype"], "m.notice");
        assert_eq!(n["body"], "paused");
        assert_eq!(text("answer", None).expect("fits")["msgtype"], "m.text");
    }

    #[test]
    fn html_is_sanitized_to_matrix_tags() {
        let html = markdown_html(
            "**hi** <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=y>\n\n```rust\nfn x() {}\n```",
        );
        assert!(html.contains("<strong>hi</strong>"));
        assert!(!html.contains("script"), "{html}");
        assert!(!html.contains("javascript"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("<code class=\"language-rust\">"), "{html}");
    }

    #[test]
    fn rich_message_carries_payload_mentions_and_relations() {
        let payload = json!({"v": 1, "blocks": [{"type": "weather", "location": "L", "temp": 21.5}]});
        let root = event_id!("$root");
        let c = message(
            "**L** 21.5",
            Some(&payload),
            WriterKey::Mtrix,
            &[],
            Relation { reply_to: None, thread: Some(root) },
        )
        .expect("fits");
        assert_eq!(c["com.ianm.mtrix"]["blocks"][0]["temp"], json!("21.5"));
        assert_eq!(c["body"], "**L** 21.5");
        assert_eq!(c["m.mentions"], json!({}));
        assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(c["m.relates_to"]["is_falling_back"], true);
        let r = message("x", None, WriterKey::Mxblocks, &[], Relation { reply_to: Some(root), thread: None })
            .expect("fits");
        assert_eq!(r["m.relates_to"], json!({"m.in_reply_to": {"event_id": "$root"}}));
    }

    #[test]
    fn edits_replace_the_original_with_new_content() {
        let payload = json!({"v": 1, "blocks": [{"type": "tracker", "title": "T", "state": "done"}]});
        let c = edit(event_id!("$orig"), "done", Some(&payload), WriterKey::Mtrix, &[]).expect("fits");
        assert_eq!(c["body"], "* done");
        assert_eq!(c["m.relates_to"], json!({"rel_type": "m.replace", "event_id": "$orig"}));
        assert_eq!(c["m.new_content"]["body"], "done");
        assert_eq!(c["m.new_content"]["com.ianm.mtrix"], payload);
        assert!(c.get("com.ianm.mtrix").is_none());
    }

    #[test]
    fn math_only_messages_use_msc2191_markup() {
        let c = message("a<b", None, WriterKey::Mtrix, &["a<b"], Relation::default()).expect("fits");
        assert_eq!(c["formatted_body"], "<div data-mx-maths=\"a&lt;b\"><code>a&lt;b</code></div>");
    }

    #[test]
    fn oversized_content_is_refused() {
        let big = "x".repeat(MAX_CONTENT_BYTES);
        assert!(matches!(text(&big, None), Err(Error::TooLarge(_))));
    }
}
