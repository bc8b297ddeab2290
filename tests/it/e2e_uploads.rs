//! What the persona shows beyond text, against the real Synapse media repository: an MCP
//! tool's image is uploaded as the persona and the model shows it by its `mxc://` URL; a
//! `data:` URL the model made becomes an upload; an `mxc://` URL that is neither the
//! persona's nor a member's in the asker's rooms is refused; an upload reserved but not
//! filled when richbot died is filled, at the same URL, when the turn resumes.

use std::io::Cursor;
use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value, json};

use crate::support::llm::{call, text};
use crate::support::mcp::{log_lines, stdio_toml};
use crate::support::{BOT, Env, Options};

/// An environment with the test MCP server as `t`; its log's path.
async fn env_with_tools() -> (Env, tempfile::TempDir, PathBuf) {
    let logs = tempfile::tempdir().expect("tempdir");
    let log = logs.path().join("mcp.log");
    let extra_toml = stdio_toml("t", &log, &[], "");
    (Env::start_with(Options { extra_toml, ..Default::default() }).await, logs, log)
}

/// The last message of `request` (the newest tool result or question).
fn last(request: &Value) -> Value {
    request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default()
}

/// The `mxc://` URL a tool result names.
fn mxc_in(text: &str) -> Option<String> {
    let at = text.find("mxc://")?;
    Some(text[at..].split_whitespace().next()?.trim_end_matches(':').to_owned())
}

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_pixel(w, h, image::Rgb([200, 40, 40]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img).write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png).expect("png");
    out
}

const CSV: &str = "city,temp\nLisbon,21\nOslo,3\n";

#[tokio::test]
async fn a_tools_image_and_a_made_file_are_uploaded_and_shown_and_a_foreign_mxc_is_refused() {
    let (env, _logs, log) = env_with_tools().await;
    let room = env.dm().await;
    let dot = base64::engine::general_purpose::STANDARD.encode(png(8, 8));
    let csv = base64::engine::general_purpose::STANDARD.encode(CSV);
    env.llm.respond_with(move |request| {
        let last = last(request);
        let said = last["content"].as_str().unwrap_or_default();
        if last["role"] == "user" {
            return call("t__chart", json!({"width": 40, "height": 20}));
        }
        if said.contains("is uploaded as") {
            // First a picture it only guessed at, then the right ones.
            let guessed = json!({"v": 1, "blocks": [{"type": "card", "title": "x", "image": "mxc://localhost/NotYours"}]});
            return call("rich_send", json!({"payload": guessed, "fallback": "x"}));
        }
        if said.contains("media_not_allowed") {
            let chart = request["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["content"].as_str())
                .find_map(|t| t.contains("is uploaded as").then(|| mxc_in(t)).flatten())
                .expect("the chart's URL");
            let payload = json!({"v": 1, "blocks": [
                {"type": "gallery", "images": [{"url": chart, "alt": "chart"}, {"url": format!("data:image/png;base64,{dot}"), "alt": "dot"}]},
                {"type": "file", "url": format!("data:text/csv;base64,{csv}"), "name": "temps.csv"}
            ]});
            return call("rich_send", json!({"payload": payload, "fallback": "A chart, a dot and temps.csv"}));
        }
        text("[no reply]")
    });
    env.alice.say(&room, "chart it please").await;
    env.wait_turns(&room, 1).await;

    // The tool ran once; the model read its image's URL, and was refused the guessed one.
    assert_eq!(log_lines(&log).iter().filter(|l| l.starts_with("ran chart ")).count(), 1);
    let requests = env.llm.requests();
    let told = last(&requests[1]);
    let told = told["content"].as_str().expect("the tool's result");
    assert!(told.starts_with("a 40x20 chart\n[image 1 (image/png)]\n[image 1 (image/png, "), "{told}");
    let refused: Value = serde_json::from_str(last(&requests[2])["content"].as_str().expect("a result")).expect("json");
    assert_eq!(refused["code"], "media_not_allowed", "{refused}");
    assert_eq!(refused["path"], "payload.blocks[0].image");

    // One message, its gallery and file all uploads of the persona's; then the file as a
    // message of its own, which any client offers for download.
    let sent = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(sent.len(), 2, "the refused call posted nothing: {sent:#?}");
    let payload = richbot::blocks::read_payload(&sent[0]["content"]).expect("blocks");
    let images = payload["blocks"][0]["images"].as_array().expect("a gallery").clone();
    let chart = images[0]["url"].as_str().expect("url");
    let (bytes, mime) = env.alice.download(chart).await;
    assert_eq!(mime, "image/png");
    let picture = image::load_from_memory(&bytes).expect("a picture");
    assert_eq!((picture.width(), picture.height()), (40, 20), "the tool's own image");
    let (bytes, _) = env.alice.download(images[1]["url"].as_str().expect("url")).await;
    assert_eq!(bytes, png(8, 8), "the data: URL's bytes");
    let file = &payload["blocks"][1];
    let (bytes, mime) = env.alice.download(file["url"].as_str().expect("url")).await;
    assert_eq!(bytes, CSV.as_bytes());
    assert!(mime.starts_with("text/csv"), "{mime}");
    assert_eq!((file["size"].as_u64(), file["mimetype"].as_str()), (Some(CSV.len() as u64), Some("text/csv")));
    assert!(file["url"].as_str().is_some_and(|u| u.starts_with("mxc://localhost/")));
    let offered = &sent[1]["content"];
    assert_eq!(offered["msgtype"], "m.file", "{sent:#?}");
    assert_eq!((offered["body"].as_str(), offered["url"].as_str()), (Some("temps.csv"), file["url"].as_str()));
    assert_eq!(offered["info"], json!({"size": CSV.len(), "mimetype": "text/csv"}));
}

#[tokio::test]
async fn a_members_picture_may_be_shown_again_but_not_one_from_a_room_the_asker_is_not_in() {
    let env = Env::start().await;
    let room = env.dm().await;
    // Bob's picture, in a room alice is not in but the persona is.
    let elsewhere = env.bob.create_room(&[BOT], false).await;
    env.wait_joined_seen_by(&env.bob, &elsewhere, BOT).await;
    let theirs = env.bob.upload(png(4, 4), "image/png", "b.png").await;
    let content = json!({"msgtype": "m.image", "body": "b.png", "url": theirs, "info": {"mimetype": "image/png"}});
    env.bob.send(&elsewhere, "m.room.message", content).await;
    // Bob and the persona alone: a DM, so his picture is a question too (answered
    // "[no reply]"). Its turn ends before the script is set, or it could take a step.
    env.wait_turns(&elsewhere, 1).await;
    let skip = env.llm.requests().len();
    let ours = env.alice.upload(png(6, 6), "image/png", "a.png").await;
    let content = json!({"msgtype": "m.image", "body": "a.png", "url": ours, "info": {"mimetype": "image/png"}});
    let card = |url: &str| json!({"payload": {"v": 1, "blocks": [{"type": "card", "title": "Yours", "image": url}]}, "fallback": "Yours"});
    env.llm.script([
        text("Nice."),
        call("rich_send", card(&theirs)),
        call("rich_send", card(&ours)),
        text("[no reply]"),
    ]);
    env.alice.send(&room, "m.room.message", content).await;
    env.wait_turns(&room, 1).await;
    let store = env.store().await;
    crate::support::eventually("the store has bob's picture", std::time::Duration::from_secs(30), || {
        let (store, theirs) = (store.clone(), theirs.clone());
        async move { (!store.rooms_posting_media(&theirs).await.ok()?.is_empty()).then_some(()) }
    })
    .await;
    env.alice.say(&room, "show me my picture as a card").await;
    env.wait_turns(&room, 2).await;
    let requests = &env.llm.requests()[skip..];
    let refused: Value = serde_json::from_str(last(&requests[2])["content"].as_str().expect("a result")).expect("json");
    assert_eq!(refused["code"], "media_not_allowed", "bob's picture is not alice's to see: {refused}");
    let posted: Value = serde_json::from_str(last(&requests[3])["content"].as_str().expect("a result")).expect("json");
    assert!(posted["event_id"].is_string(), "her own picture may be shown: {posted}");
    let sent = env.alice.messages_from(&room, BOT).await;
    let cards: Vec<&Value> = sent.iter().filter_map(|m| richbot::blocks::read_payload(&m["content"])).collect();
    assert_eq!(cards.len(), 1);
    assert_eq!(cards[0]["blocks"][0]["image"], ours.as_str());
}

#[tokio::test]
async fn an_upload_reserved_when_richbot_died_is_filled_at_the_same_url_and_never_made_twice() {
    let env = Env::start().await;
    let store = env.store().await;
    let matrix = richbot::matrix::Client::new(&env.synapse.url, &env.synapse.as_token, Default::default());
    let limits = env.settings().config.media.limits();
    let media = richbot::media::Media::new(matrix.clone(), limits);
    let persona = crate::support::user_id(BOT);
    let key = richbot::store::UploadKey { turn: 7, nth: 2, idx: 0 };

    // Died after the URL was reserved and recorded, before the bytes went.
    let reserved = matrix.create_mxc(&persona).await.expect("create");
    store.reserve_upload(key, &persona, &reserved, CSV.len(), None, 1).await.expect("record");
    let upload =
        richbot::media::Upload { key, bytes: CSV.as_bytes(), mimetype: "text/csv", name: "t.csv", encrypt: false };
    let clear = |mxc: &str| Ok(richbot::media::Uploaded { mxc: mxc.to_owned(), file: None });
    assert_eq!(media.upload(&store, &persona, upload).await, clear(&reserved), "the same URL, filled");
    let (bytes, _) = env.alice.download(&reserved).await;
    assert_eq!(bytes, CSV.as_bytes());
    assert_eq!(store.upload(key).await.expect("row").map(|r| r.uploaded), Some(true));
    // Asked again (a resumed turn replays the call): the record answers, nothing is sent.
    let other = richbot::media::Upload { bytes: b"other", ..upload };
    assert_eq!(media.upload(&store, &persona, other).await, clear(&reserved));
    assert_eq!(env.alice.download(&reserved).await.0, CSV.as_bytes(), "not overwritten");
    assert_eq!(store.uploads_in_turn(7).await.expect("count"), 1);

    // Bounded: bytes per upload, uploads per turn.
    let big = vec![0u8; limits.max_upload_bytes + 1];
    let too_big = richbot::media::Upload { key: richbot::store::UploadKey { idx: 1, ..key }, bytes: &big, ..upload };
    assert!(matches!(media.upload(&store, &persona, too_big).await, Err(richbot::media::UploadError::TooLarge(..))));
    for idx in 1..limits.uploads_per_turn as u32 {
        let next = richbot::media::Upload { key: richbot::store::UploadKey { idx, ..key }, ..upload };
        media.upload(&store, &persona, next).await.expect("within the bound");
    }
    let over = richbot::media::Upload { key: richbot::store::UploadKey { idx: 99, ..key }, ..upload };
    assert_eq!(
        media.upload(&store, &persona, over).await,
        Err(richbot::media::UploadError::TooMany(limits.uploads_per_turn))
    );
}

/// `ciphertext` opened with an encrypted message's `file` object, as clients open it.
fn open(file: &Value, ciphertext: Vec<u8>) -> Vec<u8> {
    let info: matrix_sdk_crypto::MediaEncryptionInfo = serde_json::from_value(file.clone()).expect("a file object");
    let mut cursor = std::io::Cursor::new(ciphertext);
    let mut clear = Vec::new();
    let mut reader = matrix_sdk_crypto::AttachmentDecryptor::new(&mut cursor, info).expect("decryptor");
    std::io::Read::read_to_end(&mut reader, &mut clear).expect("opens, its hash checked");
    clear
}

#[tokio::test]
async fn an_upload_for_an_encrypted_room_is_stored_encrypted_and_filled_again_with_the_key_recorded() {
    let env = Env::start().await;
    let store = env.store().await;
    let matrix = richbot::matrix::Client::new(&env.synapse.url, &env.synapse.as_token, Default::default());
    let media = richbot::media::Media::new(matrix.clone(), env.settings().config.media.limits());
    let persona = crate::support::user_id(BOT);
    let key = richbot::store::UploadKey { turn: 9, nth: 0, idx: 0 };
    let upload =
        richbot::media::Upload { key, bytes: CSV.as_bytes(), mimetype: "text/csv", name: "t.csv", encrypt: true };
    let made = media.upload(&store, &persona, upload).await.expect("uploaded");
    let file = made.file.clone().expect("the key that opens it");
    assert_eq!(file["url"], made.mxc.as_str());
    let (held, _) = env.alice.download(&made.mxc).await;
    assert!(!held.windows(4).any(|w| w == b"city"), "the media repository holds no clear byte of it");
    assert_eq!(open(&file, held), CSV.as_bytes());

    // Died after the URL and its key were recorded, before the bytes went: the fill uses
    // the recorded key, so what the message carries opens what was stored.
    let key = richbot::store::UploadKey { idx: 1, ..key };
    let reserved = matrix.create_mxc(&persona).await.expect("create");
    let (_, recorded) = richbot::media::seal(CSV.as_bytes(), &richbot::media::Secret::random());
    store.reserve_upload(key, &persona, &reserved, CSV.len(), Some(&recorded.to_string()), 1).await.expect("record");
    let filled = media.upload(&store, &persona, richbot::media::Upload { key, ..upload }).await.expect("filled");
    let file = filled.file.expect("a file object");
    assert_eq!((filled.mxc.as_str(), &file["key"]), (reserved.as_str(), &recorded["key"]), "the recorded key");
    assert_eq!(open(&file, env.alice.download(&reserved).await.0), CSV.as_bytes());
}
