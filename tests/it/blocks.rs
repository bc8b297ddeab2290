//! The block catalogue from outside the crate: every type, every required field, every cap,
//! the number rules, and property tests.

use proptest::prelude::*;
use richbot::blocks::{CATALOGUE, Rich, canonicalize, has_float};
use serde_json::{Value, json};

/// A valid example of every block type in the catalogue.
fn examples() -> Vec<Value> {
    let button = json!({"label": "Yes", "action": {"type": "react", "key": "✅"}, "style": "primary", "id": "yes"});
    vec![
        json!({"type": "buttons", "buttons": [button, {"label": "Tell me more", "action": {"type": "send", "body": "more please"}}]}),
        json!({"type": "chips", "chips": [button]}),
        json!({"type": "table", "columns": ["Name", {"key": "n", "label": "N", "align": "right"}], "rows": [["a", 1], {"Name": "b", "n": "2.5"}], "caption": "c"}),
        json!({"type": "chart", "series": [{"name": "temp", "values": [1, "2.5", 3]}], "kind": "line", "labels": ["a", "b", "c"], "title": "t", "unit": "°C"}),
        json!({"type": "sources", "sources": [{"title": "Docs", "url": "https://example.org/x"}]}),
        json!({"type": "card", "title": "Kettle", "subtitle": "1.7 l", "image": "mxc://example.org/abc", "price": "62.99", "currency": "EUR", "url": "https://shop.example/k", "fields": [{"label": "Colour", "value": "red"}], "actions": [button]}),
        json!({"type": "cards", "cards": [{"title": "A"}, {"title": "B", "price": 3}]}),
        json!({"type": "progress", "steps": [{"label": "Fetch", "state": "done"}, {"label": "Build", "state": "active"}], "title": "Deploy"}),
        json!({"type": "details", "summary": "Why", "body": "Because."}),
        json!({"type": "code", "code": "fn main() {}", "language": "rust", "filename": "main.rs"}),
        json!({"type": "diff", "diff": "-a\n+b", "filename": "x.txt"}),
        json!({"type": "countdown", "until": "2026-12-01T18:00:00Z", "label": "Launch"}),
        json!({"type": "event", "title": "Standup", "start": "2026-12-01T09:00:00+01:00", "end": "2026-12-01T09:15:00+01:00", "location": "Room 1", "url": "https://meet.example/x", "description": "Daily"}),
        json!({"type": "place", "name": "Cafe", "address": "Main St 1", "lat": "38.7223", "lon": "-9.1393", "url": "https://maps.example/c", "rating": "4.5"}),
        json!({"type": "ticker", "symbol": "ACME", "price": "12.34", "change": "-0.5", "currency": "USD", "series": [1, 2, "3.5"]}),
        json!({"type": "weather", "location": "Lisbon", "temp": "21.5", "unit": "C", "condition": "Sunny", "high": 23, "low": 14}),
        json!({"type": "tracker", "title": "Parcel", "state": "in transit", "steps": [{"label": "Shipped", "state": "done"}], "eta": "2026-12-02T12:00:00Z", "detail": "Van 4"}),
        json!({"type": "math", "tex": "e^{i\\pi} + 1 = 0", "display": true, "caption": "Euler"}),
        json!({"type": "gallery", "images": [{"url": "mxc://example.org/a", "alt": "a"}, {"url": "mxc://example.org/b"}]}),
        json!({"type": "file", "url": "mxc://example.org/f", "name": "report.pdf", "size": 1024, "mimetype": "application/pdf"}),
        json!({"type": "form", "id": "order.1", "fields": [{"name": "size", "label": "Size", "kind": "select", "options": ["S", "M"]}, {"name": "note", "label": "Note", "kind": "text"}], "submit": "Order"}),
        json!({"type": "stream", "id": "s1", "state": "live", "url": "https://example.org/s"}),
    ]
}

fn payload(blocks: Vec<Value>) -> Value {
    json!({"v": 1, "blocks": blocks})
}

fn check(p: Value) -> Result<Value, String> {
    Rich::checked(p).map(|r| r.to_value()).map_err(|e| e.to_string())
}

fn type_of(block: &Value) -> &str {
    block["type"].as_str().expect("examples have a type")
}

#[test]
fn every_catalogue_type_has_a_valid_example() {
    let examples = examples();
    for spec in CATALOGUE {
        assert!(examples.iter().any(|b| type_of(b) == spec.name), "no example for {}", spec.name);
    }
    assert_eq!(examples.len(), 22);
    for block in examples {
        assert_eq!(check(payload(vec![block.clone()])).map(|_| ()), Ok(()), "{block}");
    }
}

#[test]
fn each_required_field_removed_names_its_path_and_type() {
    for block in examples() {
        let ty = type_of(&block).to_owned();
        let spec = CATALOGUE.iter().find(|s| s.name == ty).expect("known");
        for field in spec.fields.iter().filter(|f| f.required) {
            let mut broken = block.clone();
            broken.as_object_mut().expect("object").remove(field.name);
            let err =
                check(payload(vec![json!({"type": "details", "summary": "s", "body": "b"}), broken])).unwrap_err();
            assert_eq!(err, format!("blocks[1] ({ty}): missing required field \"{}\"", field.name));
        }
    }
}

#[test]
fn unknown_extra_fields_pass_in_display_blocks_only() {
    for mut block in examples() {
        let ty = type_of(&block).to_owned();
        block["x_renderer_hint"] = json!({"anything": [1, 2]});
        let result = check(payload(vec![block]));
        if ty == "buttons" || ty == "chips" {
            let err = result.unwrap_err();
            assert!(err.starts_with(&format!("blocks[0] ({ty}): unknown field \"x_renderer_hint\"")), "{err}");
        } else {
            assert!(result.is_ok(), "{ty}: {result:?}");
        }
    }
}

fn button(i: usize) -> Value {
    json!({"label": format!("b{i}"), "action": {"type": "send", "body": "x"}})
}

fn items(n: usize, f: impl Fn(usize) -> Value) -> Vec<Value> {
    (0..n).map(f).collect()
}

/// Each cap: a block at the cap passes, one over it fails with this message.
#[test]
fn each_cap_exceeded_by_one_is_refused() {
    type Make = Box<dyn Fn(usize) -> Value>;
    let s = |n: usize| "x".repeat(n);
    let cases: Vec<(&str, usize, Make, &str)> = vec![
        (
            "buttons",
            8,
            Box::new(|n| json!({"type": "buttons", "buttons": items(n, button)})),
            "blocks[0] (buttons): buttons: must have 1-8 items (got 9)",
        ),
        (
            "chips",
            12,
            Box::new(|n| json!({"type": "chips", "chips": items(n, button)})),
            "blocks[0] (chips): chips: must have 1-12 items (got 13)",
        ),
        (
            "button label",
            80,
            Box::new(
                move |n| json!({"type": "buttons", "buttons": [{"label": s(n), "action": {"type": "react", "key": "k"}}]}),
            ),
            "blocks[0] (buttons): buttons[0].label: must be one line of 1-80 characters",
        ),
        (
            "button id",
            64,
            Box::new(
                move |n| json!({"type": "buttons", "buttons": [{"label": "l", "id": s(n), "action": {"type": "react", "key": "k"}}]}),
            ),
            "blocks[0] (buttons): buttons[0].id: must be 1-64 characters of A-Z a-z 0-9 _ . : -",
        ),
        (
            "table columns",
            20,
            Box::new(|n| json!({"type": "table", "columns": items(n, |i| json!(format!("c{i}"))), "rows": [["a"]]})),
            "blocks[0] (table): columns: must have 1-20 items (got 21)",
        ),
        (
            "table rows",
            200,
            Box::new(|n| json!({"type": "table", "columns": ["a"], "rows": items(n, |_| json!(["x"]))})),
            "blocks[0] (table): rows: must have 1-200 items (got 201)",
        ),
        (
            "table cells",
            2,
            Box::new(|n| json!({"type": "table", "columns": ["a", "b"], "rows": [items(n, |_| json!("x"))]})),
            "blocks[0] (table): rows[0]: has 3 cells but there are 2 columns",
        ),
        (
            "chart series",
            8,
            Box::new(|n| json!({"type": "chart", "series": items(n, |_| json!({"values": [1]}))})),
            "blocks[0] (chart): series: at most 8 series (got 9)",
        ),
        (
            "chart points",
            500,
            Box::new(|n| json!({"type": "chart", "series": [{"values": items(n, |i| json!(i))}]})),
            "blocks[0] (chart): series[0].values: must have 1-500 items (got 501)",
        ),
        (
            "sources",
            20,
            Box::new(
                |n| json!({"type": "sources", "sources": items(n, |_| json!({"title": "t", "url": "https://x.example"}))}),
            ),
            "blocks[0] (sources): sources: must have 1-20 items (got 21)",
        ),
        (
            "cards",
            10,
            Box::new(|n| json!({"type": "cards", "cards": items(n, |_| json!({"title": "t"}))})),
            "blocks[0] (cards): cards: must have 1-10 items (got 11)",
        ),
        (
            "card actions",
            4,
            Box::new(|n| json!({"type": "card", "title": "t", "actions": items(n, button)})),
            "blocks[0] (card): actions: must have 1-4 items (got 5)",
        ),
        (
            "gallery",
            20,
            Box::new(|n| json!({"type": "gallery", "images": items(n, |i| json!({"url": format!("mxc://s/{i}")}))})),
            "blocks[0] (gallery): images: must have 2-20 items (got 21)",
        ),
        (
            "math caption",
            200,
            Box::new(move |n| json!({"type": "math", "tex": "x", "caption": s(n)})),
            "blocks[0] (math): caption: must be one line of 1-200 characters",
        ),
        (
            "string field",
            4000,
            Box::new(move |n| json!({"type": "weather", "location": s(n), "temp": 1})),
            "blocks[0] (weather): location: must be at most 4000 characters (got 4001)",
        ),
        (
            "text field",
            16000,
            Box::new(move |n| json!({"type": "code", "code": s(n)})),
            "blocks[0] (code): code: must be at most 16000 characters (got 16001)",
        ),
    ];
    for (what, cap, make, error) in cases {
        assert!(check(payload(vec![make(cap)])).is_ok(), "{what} at its cap {cap} should pass");
        assert_eq!(check(payload(vec![make(cap + 1)])).unwrap_err(), error, "{what}");
    }
    let detail = json!({"type": "details", "summary": "s", "body": "b"});
    assert!(check(payload(vec![detail.clone(); 8])).is_ok());
    assert_eq!(check(payload(vec![detail; 9])).unwrap_err(), "blocks: at most 8 blocks and at least 1 (got 9)");
    assert_eq!(check(payload(vec![])).unwrap_err(), "blocks: at most 8 blocks and at least 1 (got 0)");
    assert_eq!(
        check(payload(vec![json!({"type": "gallery", "images": [{"url": "mxc://s/a"}]})])).unwrap_err(),
        "blocks[0] (gallery): images: must have 2-20 items (got 1)"
    );
}

#[test]
fn payload_size_cap_is_48_kib() {
    let body = |n: usize| json!({"type": "details", "summary": "s", "body": "x".repeat(n)});
    let at = |n: usize| payload(vec![body(16_000), body(16_000), body(16_000), body(n)]);
    let overhead = at(0).to_string().len();
    let fill = 48 * 1024 - overhead;
    assert!(check(at(fill)).is_ok());
    assert!(check(at(fill + 1)).unwrap_err().contains("at most 49152 (48 KiB)"));
    // The reader path (parse text, then validate) draws the line at the same byte.
    assert!(Rich::parse(&at(fill).to_string()).expect("loads").validate().is_ok());
    assert!(Rich::parse(&at(fill + 1).to_string()).expect("loads").validate().is_err());
}

#[test]
fn kind_errors_say_what_would_be_right() {
    let cases = [
        (
            json!({"type": "weather", "location": "L", "temp": "warm"}),
            "blocks[0] (weather): temp: must be a number: an integer or a decimal string like \"62.99\" (got a string)",
        ),
        (
            json!({"type": "weather", "location": "L", "temp": 1, "unit": "K"}),
            "blocks[0] (weather): unit: must be one of \"C\", \"F\" (got \"K\")",
        ),
        (
            json!({"type": "countdown", "until": "tomorrow"}),
            "blocks[0] (countdown): until: must be an ISO 8601 date-time like \"2026-12-01T18:00:00Z\"",
        ),
        (
            json!({"type": "file", "url": "https://x/y", "name": "n"}),
            "blocks[0] (file): url: must be an mxc://server/id URL (upload the media first)",
        ),
        (
            json!({"type": "sources", "sources": [{"title": "t", "url": "javascript:alert(1)"}]}),
            "blocks[0] (sources): sources[0].url: must be an http(s) or mxc:// URL: a host, then only URL characters (no spaces, quotes or angle brackets; encode them as %XX)",
        ),
        (
            json!({"type": "buttons", "buttons": [{"label": "", "action": {"type": "react", "key": "k"}}]}),
            "blocks[0] (buttons): buttons[0].label: must be one line of 1-80 characters",
        ),
        (
            json!({"type": "buttons", "buttons": [{"label": "x", "action": {"type": "call", "key": "k"}}]}),
            "blocks[0] (buttons): buttons[0].action.type: must be one of \"send\" (got \"call\")",
        ),
        (
            json!({"type": "progress", "steps": [{"label": "a", "state": "running"}]}),
            "blocks[0] (progress): steps[0].state: must be one of \"pending\", \"active\", \"done\", \"failed\", \"skipped\" (got \"running\")",
        ),
        (
            json!({"type": "form", "id": "f", "fields": [{"name": "a", "label": "A", "kind": "select"}]}),
            "blocks[0] (form): fields[0]: a select or multi field needs \"options\": [\"...\"]",
        ),
        (
            json!({"type": "chart", "series": [1, {"values": [1]}]}),
            "blocks[0] (chart): series: must be all numbers (one series) or all {\"name\", \"values\"} objects, not a mix",
        ),
        (
            json!({"type": "chart", "kind": "bar", "series": [3, "1.7e308"]}),
            "blocks[0] (chart): series[1]: a chart value must be within ±1e15 (got \"1.7e308\"); scale it, and say so in \"unit\"",
        ),
        (
            json!({"type": "chart", "series": [{"values": [1, 2]}, {"name": "b", "values": [0, "-2e15"]}]}),
            "blocks[0] (chart): series[1].values[1]: a chart value must be within ±1e15 (got \"-2e15\"); scale it, and say so in \"unit\"",
        ),
        (
            json!({"type": "poll", "q": "?"}),
            "blocks[0]: unknown block type \"poll\" (known: buttons, chips, table, chart, sources, card, cards, progress, details, code, diff, countdown, event, place, ticker, weather, tracker, math, gallery, file, form, stream)",
        ),
        (
            json!({"type": "weather", "v": 2, "location": "L", "temp": 1}),
            "blocks[0] (weather): block version 2 is not one this sender can emit (use 1 or leave \"v\" out)",
        ),
    ];
    for (block, want) in cases {
        assert_eq!(check(payload(vec![block.clone()])).unwrap_err(), want, "{block}");
    }
    assert_eq!(check(json!({"v": 2, "blocks": []})).unwrap_err(), "v: unsupported payload version 2 (expected 1)");
    assert_eq!(check(json!({"blocks": []})).unwrap_err(), "v: missing; a payload is {\"v\": 1, \"blocks\": [...]}");
    assert_eq!(
        check(json!({"v": 1, "blocks": ["x"]})).unwrap_err(),
        "blocks[0]: each block must be an object with a string \"type\""
    );
}

#[test]
fn unknown_blocks_load_byte_for_byte_but_fail_validation() {
    let text = r#"{"v":1,"blocks":[{"type":"poll","z":1.50,"a":[ 1 ]},{"type":"weather","v":7,"temp":"x"}]}"#;
    let rich = Rich::parse(text).expect("lenient load");
    match &rich.blocks()[0] {
        richbot::blocks::Block::Unknown { ty, raw, .. } => {
            assert_eq!(ty, "poll");
            assert_eq!(raw.get(), r#"{"type":"poll","z":1.50,"a":[ 1 ]}"#);
        }
        other => panic!("expected unknown, got {other:?}"),
    }
    assert!(matches!(&rich.blocks()[1], richbot::blocks::Block::Unknown { version: Some(7), .. }));
    assert!(rich.validate().is_err());
}

#[test]
fn numbers_are_canonicalized_before_validation() {
    let out = check(payload(vec![
        json!({"type": "weather", "location": "L", "temp": 21.5, "high": 26.0, "low": 1e-7}),
        json!({"type": "chart", "series": [0.53, 1.0, -2.25]}),
        json!({"type": "card", "title": "t", "price": 62.99, "fields": [{"label": "w", "value": 0.53396}]}),
    ]))
    .expect("valid");
    assert_eq!(out["blocks"][0]["temp"], json!("21.5"));
    assert_eq!(out["blocks"][0]["high"], json!(26));
    assert_eq!(out["blocks"][0]["low"], json!("0.0000001"));
    assert_eq!(out["blocks"][1]["series"], json!(["0.53", 1, "-2.25"]));
    assert_eq!(out["blocks"][2]["price"], json!("62.99"));
    assert_eq!(out["blocks"][2]["fields"][0]["value"], json!("0.53396"));
    assert!(!has_float(&out));

    let max = json!({"type": "ticker", "symbol": "S", "price": 9007199254740991i64});
    assert!(check(payload(vec![max])).is_ok());
    for big in [9007199254740993i64, -9007199254740993i64] {
        let err = check(payload(vec![json!({"type": "ticker", "symbol": "S", "price": big})])).unwrap_err();
        assert_eq!(
            err,
            format!("blocks[0].price: integer {big} is outside ±(2^53-1); send it as a decimal string like \"{big}\"")
        );
    }
}

#[test]
fn whole_event_content_is_canonicalized_including_new_content() {
    let mut content = json!({"body": "* x", "com.ianm.mtrix": {"v": 1, "n": 1.5}, "m.new_content": {"com.ianm.mtrix": {"v": 1.0, "n": [2.5]}}});
    canonicalize(&mut content, "").expect("ok");
    assert_eq!(content["m.new_content"]["com.ianm.mtrix"], json!({"v": 1, "n": ["2.5"]}));
    assert_eq!(content["com.ianm.mtrix"]["n"], json!("1.5"));
    assert!(!has_float(&content));
}

#[test]
fn upstream_fixtures_pass_unchanged() {
    for name in ["02-table.json", "06-code-diff.json"] {
        let text =
            std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).expect("fixture");
        let value: Value = serde_json::from_str(&text).expect("json");
        let out = Rich::checked(value.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.to_value(), value, "{name} changed");
    }
}

#[test]
fn math_and_buttons_are_found() {
    let rich = Rich::checked(payload(vec![
        json!({"type": "math", "tex": "a^2"}),
        json!({"type": "buttons", "buttons": [{"label": "Yes", "action": {"type": "react", "key": "✅"}}]}),
        json!({"type": "cards", "cards": [{"title": "c", "actions": [{"label": "Buy", "id": "buy", "action": {"type": "send", "body": "buy it"}}]}]}),
    ]))
    .expect("valid");
    assert_eq!(rich.find_math(), vec!["a^2"]);
    let labels: Vec<String> = rich.buttons().into_iter().map(|b| b.label).collect();
    assert_eq!(labels, ["Yes", "Buy"]);
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[a-z]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..8).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn parsing_arbitrary_json_never_panics(v in any_json(), text in ".{0,64}") {
        let _ = Rich::from_value(&v).map(|r| r.validate());
        let _ = Rich::parse(&text);
        let _ = Rich::checked(json!({"v": 1, "blocks": [v]}));
    }

    #[test]
    fn canonicalize_removes_floats_and_is_idempotent(v in any_json()) {
        let mut once = v.clone();
        if canonicalize(&mut once, "").is_ok() {
            prop_assert!(!has_float(&once));
            let mut twice = once.clone();
            prop_assert!(canonicalize(&mut twice, "").is_ok());
            prop_assert_eq!(once, twice);
        }
    }

    #[test]
    fn a_validated_payload_round_trips(i in 0usize..22, temp in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
        let mut blocks = vec![examples()[i].clone()];
        blocks.push(json!({"type": "weather", "location": "X", "temp": temp}));
        let rich = Rich::checked(payload(blocks)).expect("valid");
        let text = serde_json::to_string(&rich.to_value()).expect("serialize");
        let again = Rich::parse(&text).expect("reparse");
        prop_assert!(again.validate().is_ok());
        prop_assert_eq!(again.to_value(), rich.to_value());
    }
}

#[test]
fn url_fields_are_parsed_strictly() {
    let place = |url: &str| payload(vec![json!({"type": "place", "name": "P", "url": url})]);
    for good in [
        "https://example.org",
        "http://127.0.0.1:8080/a/b?c=d&e=%20f#g",
        "https://[::1]:8443/x",
        "https://shop.example/k(1)",
        "mxc://example.org/abc_DEF-1",
    ] {
        assert!(check(place(good)).is_ok(), "{good}: {:?}", check(place(good)));
    }
    for bad in [
        "http://x\"><script>",
        "https://example.org/a b",
        "https://example.org/<b>",
        "https://example.org/'x'",
        "https://bank.example@evil.example/",
        "https://",
        "https://:80/",
        "https://-x.example/",
        "https://example.org:99999999/",
        "javascript:alert(1)",
        "HTTPS://example.org",
        "ftp://example.org",
        "mxc://example.org/a/b",
        "mxc://exa\"mple.org/a",
        "https://example.org/\u{202E}",
    ] {
        let e = check(place(bad)).expect_err(bad);
        assert!(e.contains("blocks[0] (place): url: must be an http(s) or mxc:// URL"), "{bad}: {e}");
    }
}

/// Characters that turn a line around or hide in it leave one-line fields (a file named
/// `invoice<U+202E>fdp.exe` would show as `invoiceexe.pdf`); multi-line text, emoji
/// sequences and joiners stay as written.
#[test]
fn one_line_fields_lose_bidi_and_zero_width_characters_and_text_keeps_them() {
    let rich = Rich::checked(payload(vec![
        json!({"type": "file", "url": "mxc://example.org/f", "name": "invoice\u{202E}fdp.exe"}),
        json!({"type": "buttons", "buttons": [{"label": "Pay\u{200B}Pal \u{2066}ok\u{2069} 👨\u{200D}👩\u{200D}👧", "action": {"type": "react", "key": "✅"}}]}),
        json!({"type": "code", "code": "let s = \"\u{202E}\";"}),
    ]))
    .expect("checked");
    let value = rich.to_value();
    assert_eq!(value["blocks"][0]["name"], "invoicefdp.exe");
    assert_eq!(value["blocks"][1]["buttons"][0]["label"], "PayPal ok 👨\u{200D}👩\u{200D}👧");
    assert_eq!(value["blocks"][2]["code"], "let s = \"\u{202E}\";", "code is multi-line text, as written");
}
