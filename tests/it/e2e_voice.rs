//! Voice messages end to end, on the real Synapse with real speech (espeak-ng speaking,
//! Whisper base listening behind the OpenAI audio API): the bounds refuse before anything
//! is sent, by what a message states and by what its stream holds, and the asker's day
//! of seconds runs out; an endpoint that fails or refuses is told, and the turn goes on;
//! a persona that cannot listen says so once; a persona with `voice_replies` answers a
//! spoken question aloud too, in a clear DM and in an encrypted one (a real E2EE client),
//! and what it said transcribes back to its answer.

use std::time::Duration;

use serde_json::{Value, json};

use richbot::speech::Endpoint;
use richbot::strings;

use crate::support::llm::text;
use crate::support::speech::{Refusing, SpeechServer, requests_to, send_voice, spoken, voice_content};
use crate::support::{BOT, Env, Options, notices};

const QUESTION: &str = "What is the weather in Lisbon right now?";
const LONG: &str = "What is the weather in Lisbon right now, and what will it be tomorrow morning, \
                    and on Saturday and Sunday, and is it going to rain next week?";
const ANSWER: &str = "The weather in Lisbon is sunny and warm today.";
const TRANSCRIPTIONS: &str = "/v1/audio/transcriptions";

/// What the model was last told in its `n`th request.
fn asked(env: &Env, n: usize) -> String {
    let request = &env.llm.requests()[n];
    let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
    last["content"].as_str().unwrap_or_default().to_owned()
}

fn metric(metrics: &str, name: &str) -> Option<u64> {
    metrics.lines().find_map(|l| l.strip_prefix(&format!("{name} "))?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_messages_past_the_bounds_or_the_askers_day_are_refused_before_they_are_sent_and_the_member_told() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("speech.log");
    let server = SpeechServer::start(&log).await;
    let extra_toml = format!(
        "[transcription]\nbase_url = \"{}\"\nmax_seconds = 5\n\n[budget]\naudio_seconds_per_day = 5\n",
        server.base_url
    );
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    let room = env.dm().await;
    env.llm.respond_with(|_| text("Noted."));
    let (short, long) = (spoken(QUESTION, dir.path()), spoken(LONG, dir.path()));

    // It says it is 30 s long: refused before it is fetched.
    send_voice(&env.alice, &room, short.clone(), 30_000).await;
    env.wait_messages(&room, BOT, 2).await;
    // It says 1 s, but its stream holds more than 5: refused before it is sent.
    send_voice(&env.alice, &room, long, 1_000).await;
    env.wait_messages(&room, BOT, 4).await;
    // Within the bounds: heard, its seconds counted.
    send_voice(&env.alice, &room, short.clone(), 2_900).await;
    env.wait_messages(&room, BOT, 5).await;
    // The day's 5 s have no room for 3 more.
    send_voice(&env.alice, &room, short, 2_900).await;
    env.wait_messages(&room, BOT, 7).await;

    let told = notices(&env.alice.messages_from(&room, BOT).await);
    assert_eq!(told.len(), 3, "{told:#?}");
    assert_eq!(told[0], strings::voice_too_long(30, 5));
    let held: u64 = told[1]
        .strip_prefix("🎤 Your voice message is ")
        .and_then(|t| t.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{}", told[1]));
    assert!(held > 5, "the stream's own length: {}", told[1]);
    assert_eq!(told[1], strings::voice_too_long(held, 5));
    assert_eq!(told[2], strings::voice_budget_spent(5));

    assert!(asked(&env, 0).ends_with("(not shown to you: longer than the 5 s transcribed)"), "{}", asked(&env, 0));
    assert!(asked(&env, 1).ends_with("(not shown to you: longer than the 5 s transcribed)"), "{}", asked(&env, 1));
    assert!(asked(&env, 2).ends_with(&format!("s] {QUESTION}")), "{}", asked(&env, 2));
    let spent = "(not shown to you: over the asker's daily seconds of voice messages)";
    assert!(asked(&env, 3).ends_with(spent), "{}", asked(&env, 3));
    assert_eq!(requests_to(&log, TRANSCRIPTIONS), 1, "only the one within the bounds was sent");
    env.alice.say(&room, "!usage").await;
    env.wait_messages(&room, BOT, 8).await;
    let usage = notices(&env.alice.messages_from(&room, BOT).await).pop().expect("a notice");
    assert!(usage.ends_with(" Voice messages: 3 s heard, of your 5 s a day."), "{usage}");
    let metrics = env.metrics().await;
    assert_eq!(metric(&metrics, "richbot_voice_refused_total"), Some(3), "{metrics}");
    assert_eq!(metric(&metrics, "richbot_voice_transcribed_total"), Some(1), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_down_or_misconfigured_is_told_and_a_persona_that_cannot_listen_says_so_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refusing = Refusing::start(503).await;
    let extra_toml = format!(
        "[transcription]\nbase_url = \"{}\"\n\n[[personas]]\nlocalpart = \"rb_deaf\"\ndisplay_name = \"Deaf\"\ntranscription = false\n",
        refusing.base_url
    );
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    let room = env.dm().await;
    env.llm.respond_with(|_| text("Noted."));
    let clip = spoken(QUESTION, dir.path());

    send_voice(&env.alice, &room, clip.clone(), 2_900).await;
    env.wait_messages(&room, BOT, 2).await;
    refusing.set(404);
    send_voice(&env.alice, &room, clip.clone(), 2_900).await;
    let posted = env.wait_messages(&room, BOT, 4).await;
    let told = notices(&env.alice.messages_from(&room, BOT).await);
    assert_eq!(told, [strings::VOICE_FAILED, strings::VOICE_MISCONFIGURED]);
    let answers = posted.iter().filter(|m| m["content"]["body"] == "Noted.").count();
    assert_eq!(answers, 2, "the turns went on: {posted:#?}");
    let line = asked(&env, 0);
    assert!(line.ends_with("(not shown to you: it could not be transcribed (it answered HTTP 503))"), "{line}");
    assert!(asked(&env, 1).contains("(not shown to you: it could not be transcribed ("), "{}", asked(&env, 1));

    // A persona with `transcription = false` is never sent a voice message, and says so
    // once an hour, not once a message.
    let deaf = "@rb_deaf:localhost";
    let quiet = env.alice.create_room(&[deaf], true).await;
    env.wait_joined(&quiet, deaf).await;
    send_voice(&env.alice, &quiet, clip.clone(), 2_900).await;
    env.wait_messages(&quiet, deaf, 2).await;
    send_voice(&env.alice, &quiet, clip, 2_900).await;
    env.wait_messages(&quiet, deaf, 3).await;
    let told = notices(&env.alice.messages_from(&quiet, deaf).await);
    assert_eq!(told, [strings::CANNOT_LISTEN]);
    assert!(asked(&env, 3).ends_with("(not shown to you: you cannot listen to voice messages)"), "{}", asked(&env, 3));
    assert_eq!(refusing.asked(), 2, "only richbot's two were sent");
    let metrics = env.metrics().await;
    assert_eq!(metric(&metrics, "richbot_voice_failed_total"), Some(2), "{metrics}");
}

/// The words of a voice answer's bytes, as Whisper hears them.
async fn heard(server: &SpeechServer, audio: Vec<u8>) -> String {
    let whisper = Endpoint::new(&server.base_url, "whisper-1", None, Duration::from_secs(120));
    whisper.transcribe(audio, "answer.ogg", "audio/ogg").await.expect("transcribed").to_lowercase()
}

/// A voice answer as posted: m.audio marked as voice, with its length and waveform.
fn check_voice_answer(content: &Value) {
    assert_eq!(content["msgtype"], "m.audio", "{content:#}");
    assert_eq!(content["org.matrix.msc3245.voice"], json!({}), "{content:#}");
    assert_eq!(content["info"]["mimetype"], "audio/ogg");
    let ms = content["info"]["duration"].as_u64().expect("a duration");
    assert!((1_000..20_000).contains(&ms), "{ms} ms");
    assert_eq!(content["org.matrix.msc1767.audio"]["duration"], ms);
    let waveform = content["org.matrix.msc1767.audio"]["waveform"].as_array().expect("a waveform");
    assert!(!waveform.is_empty() && waveform.len() <= 100, "{waveform:?}");
    assert_eq!(waveform.iter().filter_map(Value::as_u64).max(), Some(1024));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_with_voice_replies_answers_a_spoken_question_aloud_in_clear_and_encrypted_dms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("speech.log");
    let server = SpeechServer::start(&log).await;
    let extra_toml = format!(
        "[transcription]\nbase_url = \"{0}\"\n\n[speech]\nbase_url = \"{0}\"\n\n\
         [[personas]]\nlocalpart = \"richbot\"\ndisplay_name = \"Richbot\"\nvoice_replies = true\n",
        server.base_url
    );
    let options = Options { extra_toml, personas: vec![("rb_helper", "Helper")], ..Default::default() };
    let env = Env::start_with(options).await;
    env.llm.respond_with(|_| text(ANSWER));
    let clip = spoken(QUESTION, dir.path());

    let room = env.dm().await;
    send_voice(&env.alice, &room, clip.clone(), 2_900).await;
    let posted = env.wait_messages(&room, BOT, 2).await;
    assert_eq!(posted[0]["content"]["body"], ANSWER, "the text first: {posted:#?}");
    check_voice_answer(&posted[1]["content"]);
    let (audio, _) = env.alice.download(posted[1]["content"]["url"].as_str().expect("a clear URL")).await;
    assert_eq!(&audio[..4], b"OggS");
    let words = heard(&server, audio).await;
    // espeak-ng is not a clear speaker ("in Lisbon" comes back garbled); these words do.
    assert!(words.contains("warm today"), "{words}");

    // A typed question gets a typed answer only.
    env.alice.say(&room, "thanks, and tomorrow?").await;
    env.wait_turns(&room, 2).await;
    assert_eq!(env.alice.messages_from(&room, BOT).await.len(), 3);
    assert_eq!(requests_to(&log, "/v1/audio/speech"), 1);

    // Encrypted: the question is sealed by a real E2EE client, the answer's audio uploaded
    // encrypted, its key in the encrypted message.
    crate::e2e_encrypted::devices_ready(&env).await;
    let (mut alice, secret_room) = crate::e2e_encrypted::encrypted_dm(&env).await;
    let extra = voice_content(None, clip.len(), 2_900);
    let file = (clip.as_slice(), "audio/ogg", "Voice message.ogg");
    alice.send_file_with(&secret_room, "m.audio", file, "Voice message.ogg", extra).await;
    let events = alice.wait_messages(&secret_room, BOT, 2).await;
    let answers = crate::support::e2ee::from(&events, BOT);
    assert_eq!(answers[0]["content"]["body"], ANSWER, "{events:#?}");
    let line = asked(&env, env.llm.requests().len() - 1);
    assert!(line.ends_with(&format!("s] {QUESTION}")), "the encrypted question was heard: {line}");
    let content = &answers[1]["content"];
    check_voice_answer(content);
    assert!(content.get("url").is_none(), "no clear URL in an encrypted room: {content:#}");
    let file = &content["file"];
    let (sealed, _) = env.alice.download(file["url"].as_str().expect("its URL")).await;
    assert_ne!(&sealed[..4], b"OggS", "stored encrypted");
    // AES-CTR: sealing again with the same key and IV opens it.
    let secret = richbot::media::Secret::of(file).expect("its key");
    let audio = richbot::media::seal(&sealed, &secret).0;
    let words = heard(&server, audio).await;
    assert!(words.contains("warm today"), "{words}");
    alice.stop().await;
    assert_eq!(requests_to(&log, "/v1/audio/speech"), 2);
    let metrics = env.metrics().await;
    assert_eq!(metric(&metrics, "richbot_voice_replies_total"), Some(2), "{metrics}");
}
