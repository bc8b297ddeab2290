//! parse + canonicalize + validate of an 8-block payload of about 4 KiB: the sender path
//! (`Rich::checked`, from a value and from the model's JSON text), and the reader path. Goal: under 50 µs. Run:
//! `cargo bench --bench blocks`.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};

fn payload() -> Value {
    json!({"v": 1, "blocks": [
        {"type": "weather", "location": "Lisbon", "temp": 21.5, "unit": "C", "condition": "Sunny", "high": 23.0, "low": 14.5},
        {"type": "table", "caption": "Shops", "columns": ["Place", {"key": "orders", "label": "Orders", "align": "right"}, "Usual"],
         "rows": (0..40).map(|i| json!([format!("Shop number {i}"), i * 3, "Seed loaf with butter"])).collect::<Vec<_>>()},
        {"type": "chart", "kind": "line", "title": "Temperature", "unit": "°C", "labels": (0..24).map(|h| format!("{h:02}:00")).collect::<Vec<_>>(),
         "series": [{"name": "today", "values": (0..24).map(|h| 12.0 + f64::from(h) * 0.37).collect::<Vec<_>>()}]},
        {"type": "card", "title": "Kettle", "subtitle": "1.7 litres", "price": 62.99, "currency": "EUR", "url": "https://shop.example/kettle",
         "fields": [{"label": "Colour", "value": "red"}, {"label": "Power", "value": "2200 W"}],
         "actions": [{"label": "Buy", "id": "buy", "action": {"type": "send", "body": "buy the kettle"}}]},
        {"type": "progress", "title": "Deploy", "steps": [{"label": "Build", "state": "done"}, {"label": "Test", "state": "active"}, {"label": "Ship", "state": "pending"}]},
        {"type": "code", "language": "rust", "code": "fn main() {\n    println!(\"hello\");\n}\n".repeat(12)},
        {"type": "event", "title": "Standup", "start": "2026-12-01T09:00:00Z", "end": "2026-12-01T09:15:00Z", "location": "Room 1"},
        {"type": "buttons", "buttons": [{"label": "Yes", "style": "primary", "action": {"type": "react", "key": "✅"}}, {"label": "No", "action": {"type": "react", "key": "❌"}}]}
    ]})
}

fn bench(c: &mut Criterion) {
    let p = payload();
    let size = p.to_string().len();
    c.bench_function(&format!("checked_8_blocks_{size}_bytes"), |b| {
        // The input is consumed, so each iteration gets a fresh copy, made outside the timing.
        b.iter_batched(|| p.clone(), |v| richbot::blocks::Rich::checked(v).expect("valid"), BatchSize::SmallInput)
    });
    // From the text the model sends (with its floats): parse the JSON, then the above.
    let raw = p.to_string();
    c.bench_function(&format!("text_parse_canonicalize_validate_{}_bytes", raw.len()), |b| {
        b.iter(|| {
            let v: Value = serde_json::from_str(std::hint::black_box(&raw)).expect("json");
            richbot::blocks::Rich::checked(v).expect("valid")
        })
    });
    // The reader path, side by side: load JSON text leniently (unknown blocks kept
    // byte-for-byte), then validate.
    let text =
        serde_json::to_string(&richbot::blocks::Rich::checked(p.clone()).expect("valid").to_value()).expect("text");
    c.bench_function(&format!("reader_parse_and_validate_{}_bytes", text.len()), |b| {
        b.iter(|| richbot::blocks::Rich::parse(std::hint::black_box(&text)).expect("loads").validate().expect("valid"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
