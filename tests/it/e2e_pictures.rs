//! What members see of a rich message's pictures, on the real Synapse: a chart whose
//! fallback is one vague sentence still reaches a clear DM as a picture (drawn by richbot,
//! uploaded once, shown inline with the data in its `alt`) and as numbers in the text,
//! with a card's picture inline too; in an encrypted DM (a real E2EE client) the same
//! pictures go as encrypted `m.image` messages after it, and the media repository holds
//! none of them in the clear.

use base64::Engine;
use serde_json::{Value, json};

use crate::e2e_media::png;
use crate::support::llm::{call, text};
use crate::support::{BOT, Env};

const PNG_MAGIC: &[u8] = b"\x89PNG";

/// A chart with a vague fallback and a card whose picture is a `data:` URL.
fn chart_and_card() -> Value {
    let picture = base64::engine::general_purpose::STANDARD.encode(png(32, 16));
    let payload = json!({"v": 1, "blocks": [
        {"type": "chart", "title": "Revenue", "unit": "k€", "labels": ["Q1", "Q2", "Q3", "Q4"],
         "series": [{"name": "Revenue", "values": [12, 15, 14, 19]}, {"name": "Costs", "values": [9, 10, 11, 12]}]},
        {"type": "card", "title": "Brass lamp", "image": format!("data:image/png;base64,{picture}")}
    ]});
    json!({"payload": payload, "fallback": "Here's the chart of revenue against costs."})
}

/// The chart's PNG, checked: drawn at twice its shown size, in the two series' colours.
fn check_chart(bytes: &[u8]) {
    let picture = image::load_from_memory_with_format(bytes, image::ImageFormat::Png).expect("a PNG").to_rgb8();
    assert_eq!((picture.width(), picture.height()), (960, 600));
    for (r, g, b) in &richbot::chart::PALETTE[..2] {
        assert!(picture.pixels().any(|p| p.0 == [*r, *g, *b]), "a series in ({r}, {g}, {b})");
    }
}

/// The `src` of each `<img>` in `html`, with the tag.
fn images(html: &str) -> Vec<(String, String)> {
    html.split("<img ")
        .skip(1)
        .map(|rest| {
            let tag = rest.split('>').next().unwrap_or_default().to_owned();
            let src = tag.split("src=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or_default().to_owned();
            (src, tag)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_with_a_vague_fallback_reaches_a_clear_dm_as_a_picture_and_its_numbers() {
    let env = Env::start().await;
    let room = env.dm().await;
    env.llm.script([call("rich_send", chart_and_card()), text("[no reply]")]);
    env.alice.say(&room, "chart revenue against costs").await;
    env.wait_turns(&room, 1).await;
    let sent = env.alice.messages_from(&room, BOT).await;
    assert_eq!(sent.len(), 1, "one message, nothing after it in a clear room: {sent:#?}");
    let content = &sent[0]["content"];
    let body = content["body"].as_str().expect("body");
    for number in ["Q4", "19", "Costs", "12"] {
        assert!(body.contains(number), "the numbers are in the text too: {body}");
    }
    let html = content["formatted_body"].as_str().expect("html");
    let shown = images(html);
    assert_eq!(shown.len(), 2, "the chart and the card's picture: {html}");
    let (chart, tag) = &shown[0];
    assert!(tag.contains("alt=\"Line chart: Revenue (k€). Revenue: Q1 12, Q2 15, Q3 14, Q4 19. Costs: Q1 9"), "{tag}");
    assert!(tag.contains("width=\"480\" height=\"300\""), "{tag}");
    let (bytes, mime) = env.alice.download(chart).await;
    assert_eq!(mime, "image/png");
    check_chart(&bytes);
    let (card, tag) = &shown[1];
    assert!(tag.contains("alt=\"Brass lamp\"") && tag.contains("height=\"240\""), "{tag}");
    assert_eq!(env.alice.download(card).await.0, png(32, 16));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_an_encrypted_dm_pictures_go_encrypted_after_the_message_and_none_is_stored_in_the_clear() {
    let env = Env::start().await;
    env.llm.script([call("rich_send", chart_and_card()), text("[no reply]")]);
    crate::e2e_encrypted::devices_ready(&env).await;
    let (mut alice, room) = crate::e2e_encrypted::encrypted_dm(&env).await;
    alice.say(&room, "chart revenue against costs").await;
    let events = alice.wait_messages(&room, BOT, 3).await;
    let sent = crate::support::e2ee::from(&events, BOT);
    let kinds: Vec<&str> = sent.iter().filter_map(|e| e["content"]["msgtype"].as_str()).collect();
    assert_eq!(kinds, ["m.text", "m.image", "m.image"], "{events:#?}");
    let html = sent[0]["content"]["formatted_body"].as_str().expect("html");
    assert!(!html.contains("<img"), "no picture by URL in an encrypted room: {html}");
    assert!(sent[0]["content"]["body"].as_str().is_some_and(|b| b.contains("19")), "the numbers in the text");

    let mut opened = Vec::new();
    for picture in &sent[1..] {
        let content = &picture["content"];
        assert!(content.get("url").is_none(), "no clear URL: {content}");
        let file = &content["file"];
        let (held, _) = env.alice.download(file["url"].as_str().expect("its url")).await;
        assert!(!held.starts_with(PNG_MAGIC), "the media repository holds ciphertext");
        let info: matrix_sdk_crypto::MediaEncryptionInfo = serde_json::from_value(file.clone()).expect("a file object");
        let mut cursor = std::io::Cursor::new(held);
        let mut clear = Vec::new();
        let mut reader = matrix_sdk_crypto::AttachmentDecryptor::new(&mut cursor, info).expect("decryptor");
        std::io::Read::read_to_end(&mut reader, &mut clear).expect("opens with the key the event carries");
        opened.push((content["body"].as_str().unwrap_or_default().to_owned(), clear));
    }
    assert!(opened[0].0.starts_with("Line chart: Revenue (k€)."), "{}", opened[0].0);
    check_chart(&opened[0].1);
    assert_eq!(opened[1], ("Brass lamp".to_owned(), png(32, 16)));
    // The card's own upload (the payload's `image`) is that ciphertext too.
    let payload = richbot::blocks::read_payload(&sent[0]["content"]).expect("blocks");
    let card = payload["blocks"][1]["image"].as_str().expect("the card's picture");
    assert_eq!(Some(card), sent[2]["content"]["file"]["url"].as_str());
    alice.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_asking_for_many_charts_gets_a_few_drawn_and_the_rest_as_numbers() {
    let env = Env::start().await;
    let room = env.dm().await;
    let charts: Vec<Value> =
        (0..7).map(|n| json!({"type": "chart", "title": format!("Chart {n}"), "series": [n, n + 1, n + 2]})).collect();
    let args = json!({"payload": {"v": 1, "blocks": charts}, "fallback": "Seven charts."});
    env.llm.script([call("rich_send", args), text("[no reply]")]);
    env.alice.say(&room, "chart everything").await;
    env.wait_turns(&room, 1).await;
    let sent = env.alice.messages_from(&room, BOT).await;
    let html = sent[0]["content"]["formatted_body"].as_str().expect("html");
    assert_eq!(images(html).len(), richbot::turn::media::pictures::CHARTS_PER_MESSAGE, "{html}");
    let body = sent[0]["content"]["body"].as_str().expect("body");
    assert!(body.contains("Chart 6") && body.contains('8'), "the undrawn ones by their numbers: {body}");
}
