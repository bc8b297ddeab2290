//! The completion rule, type by type: a vague fallback gets the block's rendering with
//! every fact in it; a fallback that already says it all gets nothing added (only the
//! action lines, which text cannot carry).

use serde_json::{Value, json};

use super::*;

fn one(block: Value) -> Value {
    json!({"v": 1, "blocks": [block]})
}

/// `block` completes a vague fallback with every one of `facts` (in both forms), and a
/// fallback made of its own plain rendering gets nothing more.
fn completes(block: Value, facts: &[&str]) {
    let ty = block["type"].as_str().unwrap_or_default().to_owned();
    let c = complete("Here you go.", &one(block.clone()), Pictures::default());
    for fact in facts {
        assert!(c.plain.contains(fact), "{ty}: plain lacks {fact:?}:\n{}", c.plain);
        // In HTML, a list's numbers are the list's and an address is the link's.
        let unnumbered = fact.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').trim_start();
        let shown =
            text_of(&c.html).contains(unnumbered) || c.html.contains(&format!("href=\"{}\"", doc::escape(fact)));
        assert!(shown, "{ty}: html lacks {fact:?}:\n{}", c.html);
    }
    let said = complete(&format!("Here you go.\n\n{}", c.plain), &one(block), Pictures::default());
    assert!(said.is_empty(), "{ty}: a fallback that says it all got more:\n{}", said.plain);
}

/// What an HTML client shows as text: tags dropped, entities decoded.
fn text_of(html: &str) -> String {
    let out = crate::render::plain::untagged(html);
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&")
}

#[test]
fn every_catalogue_type_has_a_renderer_and_no_other() {
    let mut ours: Vec<&str> = RENDERERS.iter().map(|(n, _)| *n).collect();
    let mut catalogue: Vec<&str> = crate::blocks::names().collect();
    ours.sort_unstable();
    catalogue.sort_unstable();
    assert_eq!(ours, catalogue);
    assert_eq!(ours.len(), 22);
}

#[test]
fn table() {
    let block = json!({"type": "table", "caption": "Plans", "columns": ["Plan", {"key": "p", "label": "Price", "align": "right"}],
        "rows": [["Basic", "5"], {"Plan": "Pro", "p": "12.50"}]});
    completes(block.clone(), &["Plans", "Plan", "Price", "Basic", "Pro", "12.50"]);
    let (_, plain) = render_block(&block).expect("renders");
    assert_eq!(plain, "Plans\nPlan   Price\n-----  -----\nBasic      5\nPro    12.50");
    // A Markdown table in the fallback carries the cells.
    let md = "| Plan | Price |\n|---|---|\n| Basic | 5 |\n| Pro | **12.50** |\n\nPlans";
    assert!(complete(md, &one(block), Pictures::default()).is_empty());
}

#[test]
fn chart() {
    let block = json!({"type": "chart", "title": "Revenue", "unit": "k€", "labels": ["Q1", "Q2"],
        "series": [{"name": "Revenue", "values": [10, "12.5"]}, {"name": "Costs", "values": [8, 9]}]});
    completes(block, &["Revenue", "k€", "Q1", "Q2", "Costs", "10", "12.5", "8", "9"]);
    completes(json!({"type": "chart", "series": [3, 4, 5]}), &["1", "3", "5"]);
}

#[test]
fn sources() {
    completes(
        json!({"type": "sources", "sources": [{"title": "Docs", "url": "https://ex.org/a"}]}),
        &["Docs", "https://ex.org/a"],
    );
}

#[test]
fn card_and_cards() {
    let card = json!({"type": "card", "title": "Lamp", "subtitle": "Brass", "price": "62.99", "currency": "EUR",
        "url": "https://shop.example/lamp", "fields": [{"label": "Stock", "value": 3}],
        "actions": [{"label": "Buy now", "action": {"type": "send", "body": "buy the lamp"}}]});
    let c = complete("A lamp.", &one(card.clone()), Pictures::default());
    for fact in ["Lamp", "Brass", "62.99 EUR", "Stock: 3", "Lamp (https://shop.example/lamp)", "Reply Buy now"] {
        assert!(c.plain.contains(fact), "{fact}: {}", c.plain);
    }
    // Said in full: only the actions line is added.
    let said = complete(
        "**Lamp** (https://shop.example/lamp), brass: 62.99 EUR. Stock: 3",
        &one(card.clone()),
        Pictures::default(),
    );
    assert_eq!(said.plain, "Reply Buy now");
    let mut inner = card;
    inner.as_object_mut().map(|o| o.remove("type"));
    let cards = json!({"type": "cards", "cards": [inner, {"title": "Chair"}]});
    completes(json!({"type": "cards", "cards": [{"title": "Chair", "price": 40}]}), &["Chair", "40"]);
    assert!(complete("x", &one(cards), Pictures::default()).plain.contains("Chair"));
}

#[test]
fn progress_and_tracker_show_each_steps_state() {
    let steps = json!([{"label": "Fetch", "state": "done"}, {"label": "Build", "state": "active"}, {"label": "Ship", "state": "pending"}]);
    completes(
        json!({"type": "progress", "title": "Deploy", "steps": steps}),
        &["Deploy", "✅ Fetch", "▶️ Build", "⬜ Ship"],
    );
    completes(
        json!({"type": "tracker", "title": "Parcel", "state": "Out for delivery", "steps": steps, "eta": "2026-12-01T18:00:00Z", "detail": "Van 4"}),
        &["Parcel", "Out for delivery", "✅ Fetch", "ETA 2026-12-01 18:00 UTC", "Van 4"],
    );
}

#[test]
fn details_code_and_diff() {
    let c =
        complete("x", &one(json!({"type": "details", "summary": "Why", "body": "Because <b>."})), Pictures::default());
    assert_eq!(c.html, "<details><summary>Why</summary><p>Because &lt;b&gt;.</p></details>");
    completes(json!({"type": "details", "summary": "Why", "body": "Because."}), &["Why", "Because."]);
    let code = json!({"type": "code", "language": "rust", "filename": "a.rs", "code": "fn a() -> u8 {\n    1 < 2\n}"});
    completes(code.clone(), &["a.rs", "fn a() -> u8 {\n    1 < 2\n}"]);
    assert!(
        complete("x", &one(code.clone()), Pictures::default())
            .html
            .contains("<pre><code class=\"language-rust\">fn a() -&gt; u8")
    );
    // A fenced copy in the fallback carries it.
    assert!(
        complete("In `a.rs`:\n```rust\nfn a() -> u8 {\n    1 < 2\n}\n```", &one(code), Pictures::default()).is_empty()
    );
    completes(json!({"type": "diff", "diff": "-a\n+b"}), &["-a\n+b"]);
}

#[test]
fn math_keeps_its_caption_and_is_marked_as_maths() {
    let block = json!({"type": "math", "tex": "e^{i\\pi} + 1 = 0", "caption": "Euler"});
    completes(block.clone(), &["e^{i\\pi} + 1 = 0", "Euler"]);
    let c = complete("Euler's identity.", &one(block), Pictures::default());
    assert!(c.html.starts_with("<div data-mx-maths=\"e^{i\\pi} + 1 = 0\"><code>"), "{}", c.html);
    let inline = complete("x", &one(json!({"type": "math", "tex": "a<b", "display": false})), Pictures::default());
    assert_eq!(inline.html, "<p><span data-mx-maths=\"a&lt;b\"><code>a&lt;b</code></span></p>");
}

#[test]
fn times_places_and_figures() {
    completes(
        json!({"type": "countdown", "until": "2026-12-24T18:00:00+01:00", "label": "Party"}),
        &["Party", "2026-12-24 18:00 UTC+01:00"],
    );
    completes(
        json!({"type": "event", "title": "Standup", "start": "2026-12-01T09:00:00Z", "end": "2026-12-01T09:15:00Z", "location": "Room 2", "url": "https://meet.example/x", "description": "Daily"}),
        &["Standup", "2026-12-01 09:00 UTC", "09:15", "Room 2", "Daily", "https://meet.example/x"],
    );
    completes(
        json!({"type": "place", "name": "Café", "address": "1 Rua", "lat": "38.7", "lon": "-9.1", "rating": "4.5"}),
        &["Café", "1 Rua", "4.5", "38.7, -9.1"],
    );
    completes(
        json!({"type": "ticker", "symbol": "ACME", "price": "12.5", "currency": "USD", "change": "-0.3", "series": [1, 2]}),
        &["ACME", "12.5 USD", "▼ -0.3", "Recent: 1, 2"],
    );
    completes(
        json!({"type": "weather", "location": "Lisbon", "temp": "21.5", "condition": "Sunny", "high": 24, "low": 15}),
        &["Lisbon: 21.5 °C, Sunny (high 24, low 15)"],
    );
    // The model's own words carry a weather block: nothing is added.
    let w = json!({"type": "weather", "location": "Lisbon", "temp": "21.5", "condition": "Sunny"});
    assert!(complete("**Lisbon** — 21.5 °C and sunny", &one(w), Pictures::default()).is_empty());
    // A time is carried by its clock as the model wrote it.
    let e = json!({"type": "event", "title": "Standup", "start": "2026-12-01T09:00:00Z"});
    assert!(complete("Standup tomorrow at 09:00", &one(e), Pictures::default()).is_empty());
}

#[test]
fn gallery_file_form_and_stream() {
    completes(
        json!({"type": "gallery", "images": [{"url": "mxc://s/a", "alt": "A cat"}, {"url": "mxc://s/b"}]}),
        &["2 pictures", "A cat"],
    );
    completes(
        json!({"type": "file", "url": "mxc://s/f", "name": "report.pdf", "size": 1_500_000, "mimetype": "application/pdf"}),
        &["report.pdf (1.5 MB, application/pdf)"],
    );
    let form = json!({"type": "form", "id": "f1", "submit": "Book", "fields": [
        {"name": "d", "label": "Day", "kind": "select", "options": ["Mon", "Tue"]},
        {"name": "v", "label": "Vegetarian", "kind": "bool"}]});
    completes(form, &["1. Day: Mon / Tue", "2. Vegetarian: yes / no", "To Book, reply with your answers"]);
    assert!(complete("x", &one(json!({"type": "stream", "id": "s", "state": "live"})), Pictures::default()).is_empty());
    completes(
        json!({"type": "stream", "id": "s", "state": "live", "url": "https://ex.org/live"}),
        &["https://ex.org/live"],
    );
}

#[test]
fn buttons_and_chips_always_say_how_to_press_them() {
    let block = json!({"type": "buttons", "buttons": [
        {"label": "Yes, book it", "action": {"type": "react", "key": "✅"}},
        {"label": "No", "action": {"type": "react", "key": "❌"}},
        {"label": "Another time", "action": {"type": "send", "body": "another time please"}}]});
    let c = complete("Shall I book the table? Yes, book it · No · Another time", &one(block), Pictures::default());
    assert_eq!(c.plain, "React ✅ for Yes, book it · ❌ for No · or reply Another time");
    assert_eq!(
        c.html,
        "<p>React ✅ for <em>Yes, book it</em> · ❌ for <em>No</em> · or reply <em>Another time</em></p>"
    );
    let chips = json!({"type": "chips", "chips": [{"label": "Tea", "action": {"type": "send", "body": "tea"}}, {"label": "Coffee", "action": {"type": "send", "body": "coffee"}}]});
    assert_eq!(complete("Tea or coffee?", &one(chips), Pictures::default()).plain, "Reply Tea or Coffee");
}

#[test]
fn several_blocks_complete_in_order_and_unknown_or_broken_payloads_add_nothing() {
    let payload = json!({"v": 1, "blocks": [
        {"type": "weather", "location": "Lisbon", "temp": 21},
        {"type": "sources", "sources": [{"title": "IPMA", "url": "https://ipma.pt"}]}]});
    let c = complete("Lisbon is at 21 degrees.", &payload, Pictures::default());
    assert_eq!(c.plain, "Sources\n• IPMA (https://ipma.pt)");
    assert!(complete("x", &json!({"v": 1, "blocks": [{"type": "poll", "q": "?"}]}), Pictures::default()).is_empty());
    assert!(complete("x", &json!({"v": 2, "blocks": []}), Pictures::default()).is_empty());
    assert!(complete("x", &json!("nonsense"), Pictures::default()).is_empty());
}

#[test]
fn what_blocks_say_is_escaped_in_html() {
    let c = complete(
        "x",
        &one(json!({"type": "card", "title": "<script>x</script>", "url": "https://a.example/?q=\"><b"})),
        Pictures::default(),
    );
    assert!(!c.html.contains("<script>"), "{}", c.html);
    assert!(c.html.contains("&lt;script&gt;"), "{}", c.html);
    assert!(c.html.contains("href=\"https://a.example/?q=&quot;&gt;&lt;b\""), "{}", c.html);
}

#[test]
fn pictures_go_inline_before_their_blocks_only_where_they_may_be_shown_by_url() {
    let payload = json!({"v": 1, "blocks": [
        {"type": "chart", "series": [1, 2]},
        {"type": "card", "title": "Lamp", "image": "mxc://s/lamp"},
        {"type": "gallery", "images": [{"url": "mxc://s/a", "alt": "A \"cat\""}, {"url": "mxc://s/b"}]},
        {"type": "card", "title": "No picture", "image": "https://elsewhere.example/x.png"}
    ]});
    let chart = Inline { block: 0, src: "mxc://s/chart".into(), alt: "Line chart.".into(), width: 480, height: 300 };
    let said = "Value: 1, 2. Lamp. A \"cat\". 2 pictures. No picture.";
    let shown = complete(said, &payload, Pictures::inline(std::slice::from_ref(&chart)));
    let tags: Vec<&str> = shown.html.split("<img ").skip(1).map(|t| t.split('>').next().unwrap_or_default()).collect();
    assert_eq!(
        tags,
        [
            "src=\"mxc://s/chart\" alt=\"Line chart.\" width=\"480\" height=\"300\"",
            "src=\"mxc://s/lamp\" alt=\"Lamp\" height=\"240\"",
            "src=\"mxc://s/a\" alt=\"A &quot;cat&quot;\" height=\"240\"",
            "src=\"mxc://s/b\" alt=\"picture\" height=\"240\"",
        ],
        "{}",
        shown.html
    );
    assert!(shown.plain.is_empty(), "the text already says it all: {}", shown.plain);
    let not_inline = complete(said, &payload, Pictures { inline: false, charts: &[chart] });
    assert!(not_inline.is_empty(), "an encrypted room's message shows no picture by URL: {}", not_inline.html);
}
