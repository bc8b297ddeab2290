//! Members' pictures and files against the real Synapse media repository: a picture in a
//! DM reaches the scripted model scaled down, as an image part; a text file's text reaches
//! it as quoted data; a persona whose model cannot see says so once; a real E2EE client's
//! encrypted picture is decrypted (the attachment's key from the encrypted message) first.

use std::io::Cursor;

use base64::Engine;
use serde_json::{Value, json};

use crate::support::llm::{Step, text};
use crate::support::{BOT, Env, Options, User};

/// A PNG of `w` x `h` (a smooth gradient, as a screenshot might be).
pub fn png(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| image::Rgb([(x * 255 / w) as u8, (y * 255 / h) as u8, 90]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img).write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png).expect("png");
    out
}

/// Sends a picture or file as `user` would from Element (uploaded first).
async fn send_media(user: &User, room: &str, msgtype: &str, (bytes, mime, name): (Vec<u8>, &str, &str), caption: &str) {
    let size = bytes.len();
    let url = user.upload(bytes, mime, name).await;
    let content = json!({"msgtype": msgtype, "body": caption, "filename": name, "url": url, "info": {"mimetype": mime, "size": size}});
    user.send(room, "m.room.message", content).await;
}

/// The user messages of the model's `n`-th request.
fn user_messages(env: &Env, n: usize) -> Vec<Value> {
    let request = env.llm.requests()[n].clone();
    request["messages"].as_array().expect("messages").iter().filter(|m| m["role"] == "user").cloned().collect()
}

/// Whether `line` names a member's media as `[{what} mxc://localhost/...]` and ends `rest`.
fn named(line: &str, what: &str, rest: &str) -> bool {
    line.contains(&format!("[{what} mxc://localhost/")) && line.ends_with(rest)
}

#[tokio::test]
async fn a_picture_reaches_the_model_scaled_down_and_a_text_files_text_as_data() {
    let env = Env::start().await;
    let room = env.dm().await;
    env.llm.script([text("A blue and green gradient."), text("Two rows."), text("A sticker.")]);
    send_media(&env.alice, &room, "m.image", (png(3200, 1600), "image/png", "screen.png"), "what is this?").await;
    env.wait_messages(&room, BOT, 1).await;

    let asked = user_messages(&env, 0);
    let last = asked.last().expect("the question");
    let parts = last["content"].as_array().expect("text and image parts");
    let said = parts[0]["text"].as_str().expect("text");
    assert!(named(said, "image: screen.png", "] what is this?"), "{said}");
    let url = parts[1]["image_url"]["url"].as_str().expect("an image part");
    let data = url.strip_prefix("data:image/jpeg;base64,").expect("a JPEG data URL");
    let jpeg = base64::engine::general_purpose::STANDARD.decode(data).expect("base64");
    let picture = image::load_from_memory(&jpeg).expect("a picture");
    assert_eq!((picture.width(), picture.height()), (1568, 784), "scaled to media.max_image_px on the long side");
    assert!(jpeg.len() <= 4 * 1024 * 1024);

    let csv = "city,temp\nLisbon,21\nOslo,3\n";
    send_media(&env.alice, &room, "m.file", (csv.as_bytes().to_vec(), "text/csv", "temps.csv"), "temps.csv").await;
    env.wait_messages(&room, BOT, 2).await;
    let asked = user_messages(&env, 1);
    let file = asked.last().and_then(|m| m["content"].as_str()).expect("the file as text");
    assert!(
        file.contains("[file: temps.csv mxc://localhost/")
            && file.contains(&format!("]\n<file name=\"temps.csv\">\n{}\n</file>", csv.trim_end())),
        "{file}"
    );
    // The picture is history now: named, not sent again.
    let earlier: Vec<&Value> = asked.iter().filter(|m| m["content"].is_array()).collect();
    assert!(earlier.is_empty(), "an older picture is not sent again: {asked:?}");
    assert!(asked.iter().any(|m| m["content"].as_str().is_some_and(|t| named(
        t,
        "image: screen.png",
        "] what is this?"
    ))));
}

/// Element sends a picture, then the words about it as a second message: one turn, the
/// picture beside the question.
#[tokio::test]
async fn a_picture_then_its_question_a_second_later_are_one_turn() {
    // A window far wider than the second between the two messages: on a loaded machine
    // their delivery can be seconds apart. The question ends the wait, not the window.
    let extra_toml = "[bot]\ncoalesce_ms = 30000\n".to_owned();
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    let room = env.dm().await;
    env.llm.script([text("A gradient."), text("You're welcome.")]);
    send_media(&env.alice, &room, "m.image", (png(64, 64), "image/png", "screen.png"), "screen.png").await;
    // The member types the question a moment after the picture, as in Element.
    tokio::time::sleep(std::time::Duration::from_millis(1_000)).await;
    env.alice.say(&room, "What is in this picture?").await;
    env.wait_messages(&room, BOT, 1).await;
    env.alice.say(&room, "thanks").await;
    env.wait_messages(&room, BOT, 2).await;
    assert_eq!(env.llm.requests().len(), 2, "the picture and its question were one turn");
    let asked = user_messages(&env, 0);
    let picture = asked.iter().find(|m| m["content"].is_array()).expect("the picture, sent to the model");
    assert!(picture["content"][1]["image_url"]["url"].as_str().is_some_and(|u| u.starts_with("data:image/")));
    let last = asked.last().and_then(|m| m["content"].as_str()).expect("the question last");
    assert!(last.ends_with("What is in this picture?"), "{asked:?}");
}

/// One member's pictures hold no one else (issue 52): while their pictures wait for their
/// words, another member's question is answered; the wait counts from their first
/// picture; each waiting picture counts against their own turn limit, so a flood trips it
/// (one notice) and the pictures counted make one turn, not counted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_picture_flood_holds_no_one_else_and_trips_their_own_limit() {
    // A window far wider than a loaded machine takes to deliver Bob's question.
    let extra_toml = "[bot]\ncoalesce_ms = 20000\n\n[limits]\nturns_per_user_per_minute = 4\n".to_owned();
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    let room = env.alice.create_room(&[BOT, "@bob:localhost"], false).await;
    env.wait_joined(&room, BOT).await;
    env.bob.join(&room).await;
    // In order: the first turn is Bob's, and only then Alice's pictures'.
    env.llm.script([text("Bob, it is noon."), text("Pictures seen.")]);
    for n in 0..6 {
        let bytes = png(32, 32);
        let url = env.alice.upload(bytes.clone(), "image/png", "p.png").await;
        let content = json!({"msgtype": "m.image", "body": format!("p{n}.png"), "url": url,
            "info": {"mimetype": "image/png", "size": bytes.len()}, "m.mentions": {"user_ids": [BOT]}});
        env.alice.send(&room, "m.room.message", content).await;
    }
    env.bob.say(&room, "Richbot, what time is it?").await;
    let posted = crate::support::eventually("both answers", std::time::Duration::from_secs(90), || async {
        let m = env.alice.messages_from(&room, BOT).await;
        m.iter().any(|m| m["content"]["body"] == "Pictures seen.").then_some(m)
    })
    .await;
    let bodies: Vec<&str> = posted.iter().filter_map(|m| m["content"]["body"].as_str()).collect();
    let asked = env.llm.requests();
    let last_user = |n: usize| {
        let messages = asked[n]["messages"].as_array().cloned().unwrap_or_default();
        messages.iter().rev().find(|m| m["role"] == "user").map(Value::to_string).unwrap_or_default()
    };
    assert!(
        last_user(0).contains("what time is it"),
        "Bob's turn first, while Alice's pictures waited: {}",
        last_user(0)
    );
    assert_eq!(asked.len(), 2, "the pictures counted made one turn");
    let images = asked[1].to_string().matches(r#""type":"image_url""#).count();
    assert_eq!(images, 4, "the four pictures counted, in one turn");
    let tripped = crate::support::notices(&posted);
    assert_eq!(tripped.len(), 1, "the fifth waiting picture trips Alice's limit once: {tripped:#?}");
    assert!(tripped[0].starts_with("@alice:localhost, you've asked me a lot"), "{tripped:#?}");
    assert_eq!(bodies.iter().filter(|b| **b == "Pictures seen.").count(), 1, "{bodies:#?}");
}

#[tokio::test]
async fn a_persona_whose_model_cannot_see_says_so_once_and_the_model_is_told_what_it_missed() {
    let env = Env::start_with(Options { llm_lines: "vision = false", ..Default::default() }).await;
    let room = env.dm().await;
    env.llm.script([text("Tell me what it shows."), text("Still can't.")]);
    for n in 1..=2 {
        send_media(&env.alice, &room, "m.image", (png(64, 64), "image/png", "cat.png"), "cat.png").await;
        env.wait_messages(&room, BOT, n + 1).await;
    }
    let notices = crate::support::notices(&env.alice.messages_from(&room, BOT).await);
    assert_eq!(notices, [richbot::strings::NO_VISION], "said once");
    let asked = user_messages(&env, 0);
    let line = asked.last().and_then(|m| m["content"].as_str()).expect("text only");
    assert!(named(line, "image: cat.png", "] (not shown to you: you cannot see pictures)"), "{line}");
    assert!(env.llm.requests().iter().all(|r| !r.to_string().contains("image_url")), "no image part is sent");
}

#[tokio::test]
async fn an_endpoint_that_refuses_pictures_is_asked_again_without_them_and_not_sent_any_after() {
    let env = Env::start().await;
    let room = env.dm().await;
    env.llm.respond_with(|request| match request.to_string().contains("image_url") {
        true => Step::Status(400),
        false => text("I could not see it."),
    });
    for n in 1..=2 {
        send_media(&env.alice, &room, "m.image", (png(64, 64), "image/png", "cat.png"), "cat.png").await;
        env.wait_messages(&room, BOT, n + usize::from(n == 2)).await;
    }
    // One refused call (asked streamed, then whole, as a refusal to stream is told apart),
    // and none with pictures after it.
    let requests = env.llm.requests();
    let first_named = requests.iter().position(|r| !r.to_string().contains("image_url")).expect("named");
    assert_eq!(first_named, 2, "{requests:?}");
    assert!(requests[first_named..].iter().all(|r| !r.to_string().contains("image_url")));
    let asked = user_messages(&env, first_named);
    let line = asked.last().and_then(|m| m["content"].as_str()).expect("text only");
    assert!(named(line, "image: cat.png", "] (not shown to you: you cannot see pictures)"), "{line}");
    let notices = crate::support::notices(&env.alice.messages_from(&room, BOT).await);
    assert_eq!(notices, [richbot::strings::NO_VISION], "the member is told once, from the next picture on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypted_picture_from_a_real_e2ee_client_is_decrypted_scaled_and_seen() {
    let env = Env::start().await;
    env.llm.respond_with(|_| text("A wide gradient."));
    crate::e2e_encrypted::devices_ready(&env).await;
    let (mut alice, room) = crate::e2e_encrypted::encrypted_dm(&env).await;
    alice.send_file(&room, "m.image", (&png(2000, 500), "image/png", "wide.png"), "what is this?").await;
    let events = alice.wait_messages(&room, BOT, 1).await;
    let answers = crate::support::e2ee::from(&events, BOT);
    assert_eq!(answers[0]["content"]["body"], "A wide gradient.", "the answer decrypts: {events:#?}");

    let asked = user_messages(&env, 0);
    let parts = asked.last().and_then(|m| m["content"].as_array()).expect("text and image parts");
    let said = parts[0]["text"].as_str().expect("text");
    assert!(named(said, "image: wide.png", "] what is this?"), "{said}");
    let url = parts[1]["image_url"]["url"].as_str().expect("an image part");
    let jpeg = base64::engine::general_purpose::STANDARD
        .decode(url.strip_prefix("data:image/jpeg;base64,").expect("a JPEG data URL"))
        .expect("base64");
    let picture = image::load_from_memory(&jpeg).expect("the decrypted picture");
    assert_eq!((picture.width(), picture.height()), (1568, 392), "decrypted, then scaled");
    alice.stop().await;
}
