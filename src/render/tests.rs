//! Message content: notices, sanitizing, payloads, relations, edits, maths, sizes.

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
        Message { payload: Some(&payload), key: WriterKey::Mtrix, ..Message::text("**L** 21.5") },
        Relation { reply_to: None, thread: Some(root) },
    )
    .expect("fits");
    assert_eq!(c["com.ianm.mtrix"]["blocks"][0]["temp"], json!("21.5"));
    assert_eq!(c["body"], "L 21.5", "body is plain text; the bold is in the HTML");
    assert_eq!(c["formatted_body"], "<p><strong>L</strong> 21.5</p>");
    assert_eq!(c["m.mentions"], json!({}));
    assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
    assert_eq!(c["m.relates_to"]["is_falling_back"], true);
    let r = message(
        Message { key: WriterKey::Mxblocks, ..Message::text("x") },
        Relation { reply_to: Some(root), thread: None },
    )
    .expect("fits");
    assert_eq!(r["m.relates_to"], json!({"m.in_reply_to": {"event_id": "$root"}}));
}

#[test]
fn edits_replace_the_original_with_new_content() {
    let payload = json!({"v": 1, "blocks": [{"type": "tracker", "title": "T", "state": "done"}]});
    let c = edit(
        event_id!("$orig"),
        Message { payload: Some(&payload), key: WriterKey::Mtrix, ..Message::text("T: done") },
    )
    .expect("fits");
    assert_eq!(c["body"], "* T: done");
    assert_eq!(c["m.relates_to"], json!({"rel_type": "m.replace", "event_id": "$orig"}));
    assert_eq!(c["m.new_content"]["body"], "T: done");
    assert_eq!(c["m.new_content"]["com.ianm.mtrix"], payload);
    assert!(c.get("com.ianm.mtrix").is_none());
}

#[test]
fn math_only_messages_use_msc2191_markup() {
    let c = message(Message { key: WriterKey::Mtrix, math: &["a<b"], ..Message::text("a<b") }, Relation::default())
        .expect("fits");
    assert_eq!(c["formatted_body"], "<div data-mx-maths=\"a&lt;b\"><code>a&lt;b</code></div>");
}

#[test]
fn oversized_content_is_refused() {
    let big = "x".repeat(MAX_CONTENT_BYTES);
    assert!(matches!(text(&big, None), Err(Error::TooLarge(_))));
}

#[test]
fn task_lists_show_ticks_not_brackets() {
    assert_eq!(markdown_html("- [x] milk\n- [ ] eggs"), "<ul>\n<li>✅ milk</li>\n<li>⬜ eggs</li>\n</ul>");
}
