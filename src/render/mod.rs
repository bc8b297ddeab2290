//! Message content, built without I/O: CommonMark rendered to HTML and sanitized to what
//! Matrix clients allow, the payload under the writer key, relations (reply, thread,
//! replace), `m.mentions: {}` so the bot pings nobody by accident, and every number made
//! Matrix-safe. Sizes are checked here, where the final content exists.
//!
//! `body` is plain text (`plain.rs`): previews, notifications and reply quotes show it as
//! it is, so it carries no Markdown markers; the HTML is in `formatted_body`.
//!
//! A rich message's text is the model's fallback completed by richbot (`blocks/`): what
//! the fallback leaves out of a block, and how to press its buttons, is appended, so a
//! client that draws no blocks still shows everything. When the completed message would
//! not fit in one event, it goes as the model wrote it.

mod attachments;
mod blocks;
mod live;
mod notice;
mod plain;
mod polls;
mod snapshot;
pub use attachments::{Info, Source, file_message, image_message, voice_message};
use blocks::escape;
pub use blocks::{Completion, Inline, PICTURE_HEIGHT, Pictures, RENDERERS, complete, render_block};
pub use live::{LIVE, fits_as_edit, live};
pub use notice::{notice, notice_edit, rich_notice};
pub use plain::plain_text;
pub use polls::{HOW_TO_VOTE, poll_message, result_message};
pub use snapshot::{fence_of, open_fence, snapshot};

use std::collections::HashSet;
use std::sync::LazyLock;

use pulldown_cmark::{Event, Options, Parser, html};
use ruma::EventId;
use serde_json::{Value, json};

use crate::blocks::{BlockError, WriterKey, canonicalize};

/// The model's own text (Markdown, before richbot completed it), kept in a message whose
/// plain `body` says it otherwise: the conversation shows the model its answers as it
/// wrote them, so it keeps writing that way.
pub const SOURCE: &str = "org.richbot.source";

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
pub const TAGS: &[&str] = &[
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

/// The Markdown richbot reads: CommonMark with tables, strikethrough and task lists.
const MARKDOWN: Options = Options::ENABLE_TABLES.union(Options::ENABLE_STRIKETHROUGH).union(Options::ENABLE_TASKLISTS);

/// CommonMark to sanitized HTML.
/// Task list items (`- [x] done`) show ✅ / ⬜: Matrix HTML has no checkboxes.
pub fn markdown_html(markdown: &str) -> String {
    let mut out = String::new();
    let events = Parser::new_ext(markdown, MARKDOWN).map(|e| match e {
        Event::TaskListMarker(done) => Event::Text(if done { "✅ " } else { "⬜ " }.into()),
        other => other,
    });
    html::push_html(&mut out, events);
    SANITIZER.clean(&out).to_string().trim_end().to_owned()
}

/// What a rich message is made of: the model's fallback, its payload (under `key`), the
/// TeX of its math blocks, and the pictures it shows.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub fallback: &'a str,
    pub payload: Option<&'a Value>,
    pub key: WriterKey,
    pub math: &'a [&'a str],
    pub pictures: Pictures<'a>,
}

impl<'a> Message<'a> {
    /// Text only: no payload.
    pub fn text(fallback: &'a str) -> Self {
        Self { fallback, payload: None, key: WriterKey::default(), math: &[], pictures: Pictures::default() }
    }
}

/// The body part of a message: `msgtype`, `body`, HTML, mentions, and the payload;
/// with `completed`, the fallback completed for the payload's blocks.
fn message_body(m: Message<'_>, completed: bool) -> Value {
    let Message { fallback, payload, key, math, pictures } = m;
    let math_only = !math.is_empty() && fallback == math.join("\n\n");
    let (body, html) = match payload.filter(|_| completed) {
        // A math-only message: MSC2191 markup, the TeX itself (and its caption) as the body.
        Some(p) if math_only => {
            let c = complete("", p, pictures);
            (c.plain, c.html)
        }
        Some(p) => {
            let c = complete(fallback, p, pictures);
            let html = markdown_html(fallback);
            let body = match c.plain.is_empty() {
                true => plain_text(fallback),
                false => format!("{}\n\n{}", plain_text(fallback), c.plain),
            };
            (body, format!("{html}{}", c.html))
        }
        None if math_only => {
            let html =
                math.iter().map(|t| format!("<div data-mx-maths=\"{0}\"><code>{0}</code></div>", escape(t))).collect();
            (fallback.to_owned(), html)
        }
        None => (plain_text(fallback), markdown_html(fallback)),
    };
    let mut content = json!({
        "msgtype": "m.text",
        "body": body,
        "format": "org.matrix.custom.html",
        "formatted_body": html,
        "m.mentions": {},
    });
    if let Some(p) = payload {
        content[key.as_str()] = p.clone();
    }
    if content["body"] != fallback {
        content[SOURCE] = json!(fallback);
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

/// `build(true)` (completed) when it fits in an event, else `build(false)` (as written).
fn fitting(build: impl Fn(bool) -> Value) -> Result<Value, Error> {
    match finish(build(true)) {
        Err(Error::TooLarge(size)) => {
            tracing::debug!(size, "the completed message is too large for an event; sent as the model wrote it");
            finish(build(false))
        }
        done => done,
    }
}

/// A new message (rich when it has a payload).
pub fn message(m: Message<'_>, rel: Relation<'_>) -> Result<Value, Error> {
    fitting(|completed| {
        let mut content = message_body(m, completed);
        relate(&mut content, rel);
        content
    })
}

fn relate(content: &mut Value, rel: Relation<'_>) {
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
}

/// An edit (`m.replace`) of `original` to the new fallback and payload.
pub fn edit(original: &EventId, m: Message<'_>) -> Result<Value, Error> {
    fitting(|completed| {
        let new_content = message_body(m, completed);
        json!({
            "msgtype": "m.text",
            "body": format!("* {}", new_content["body"].as_str().unwrap_or_default()),
            "format": "org.matrix.custom.html",
            "formatted_body": format!("* {}", new_content["formatted_body"].as_str().unwrap_or_default()),
            "m.mentions": {},
            "m.new_content": new_content,
            "m.relates_to": {"rel_type": "m.replace", "event_id": original},
        })
    })
}

/// A plain text answer (CommonMark), optionally in a thread.
pub fn text(markdown: &str, thread: Option<&EventId>) -> Result<Value, Error> {
    text_in(markdown, Relation { reply_to: None, thread })
}

/// A plain text answer (CommonMark), related as `rel` says (a reply, a thread).
pub fn text_in(markdown: &str, rel: Relation<'_>) -> Result<Value, Error> {
    message(Message::text(markdown), rel)
}

#[cfg(test)]
mod tests;
