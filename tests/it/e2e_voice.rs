//! Voice messages end to end, on the real Synapse with real speech (espeak-ng speaking,
//! Whisper base listening behind the OpenAI audio API): the bounds refuse before anything
//! is sent, by what a message states and by what its bytes hold (a lying clip, a kind
//! whose length cannot be measured), and the asker's day of seconds runs out; the
//! endpoint's own seconds are charged and its words cut; an endpoint that fails or
//! refuses is told, and the turn goes on; a persona that cannot listen says so once; a
//! persona with `voice_replies` answers a spoken question aloud too, in a clear DM and in
//! an encrypted one (a real E2EE client), as Ogg Opus of the answer's length.

use serde_json::{Value, json};

use richbot::strings;

use crate::support::llm::text;
use crate::support::speech::{
    QUESTION, Refusing, SpeechServer, holds_the_question, requests_to, send_voice, silence_claiming, spoken,
    spoken_inputs, voice_content,
};
use crate::support::{BOT, Env, Options, notices};

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
    // It says 1 s, but its stream holds more: refused before it is sent.
    send_voice(&env.alice, &room, long, 1_000).await;
    env.wait_messages(&room, BOT, 4).await;
    // An hour of silence in 90 KB whose pages all say it ends at 1 s, as its message does.
    let hour = silence_claiming(3_600, 1_000);
    assert_eq!(richbot::speech::shape(&hour).duration_ms, Some((3_600 * 48_000 - 312) / 48), "what its packets hold");
    send_voice(&env.alice, &room, hour, 1_000).await;
    env.wait_messages(&room, BOT, 6).await;
    // A kind of audio whose length cannot be measured.
    send_voice(&env.alice, &room, b"\0\0\0\x20ftypM4A isom".repeat(100), 2_000).await;
    env.wait_messages(&room, BOT, 8).await;
    // Within the bounds: heard, its seconds counted.
    send_voice(&env.alice, &room, short.clone(), 2_900).await;
    env.wait_messages(&room, BOT, 9).await;
    // The day's 5 s have no room for 3 more.
    send_voice(&env.alice, &room, short, 2_900).await;
    env.wait_messages(&room, BOT, 11).await;

    let told = notices(&env.alice.messages_from(&room, BOT).await);
    assert_eq!(told.len(), 5, "{told:#?}");
    assert_eq!(told[0], strings::voice_too_long(30, 5));
    let held: u64 = told[1]
        .strip_prefix("🎤 Your voice message says it is 1 s long, but it holds ")
        .and_then(|t| t.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{}", told[1]));
    assert!(held > 5, "the stream's own length: {}", told[1]);
    assert_eq!(told[2], strings::voice_not_as_stated(1, "it holds 3600 s"));
    assert_eq!(told[3], strings::voice_unmeasurable(richbot::speech::UNKNOWN));
    assert_eq!(told[4], strings::voice_budget_spent(5));

    assert!(asked(&env, 0).ends_with("(not shown to you: longer than the 5 s transcribed)"), "{}", asked(&env, 0));
    let lied = format!("(not shown to you: it is not what it says (it holds {held} s))");
    assert!(asked(&env, 1).ends_with(&lied), "{}", asked(&env, 1));
    assert!(
        asked(&env, 2).ends_with("(not shown to you: it is not what it says (it holds 3600 s))"),
        "{}",
        asked(&env, 2)
    );
    assert!(
        asked(&env, 3).contains("(not shown to you: it could not be measured (it is not Ogg Opus"),
        "{}",
        asked(&env, 3)
    );
    assert!(heard_the_question(&asked(&env, 4)), "{}", asked(&env, 4));
    let spent = "(not shown to you: over the asker's daily seconds of voice messages)";
    assert!(asked(&env, 5).ends_with(spent), "{}", asked(&env, 5));
    assert_eq!(requests_to(&log, TRANSCRIPTIONS), 1, "only the one within the bounds was sent");
    env.alice.say(&room, "!usage").await;
    env.wait_messages(&room, BOT, 12).await;
    let usage = notices(&env.alice.messages_from(&room, BOT).await).pop().expect("a notice");
    assert!(usage.ends_with(" Voice messages: 3 s heard, of your 5 s a day."), "{usage}");
    let metrics = env.metrics().await;
    assert_eq!(metric(&metrics, "richbot_voice_refused_total"), Some(5), "{metrics}");
    assert_eq!(metric(&metrics, "richbot_voice_transcribed_total"), Some(1), "{metrics}");
}

/// What an endpoint says it heard is charged when it is more than the clip holds, its
/// words go into the prompt cut to what the clip's seconds can say, a member's media type
/// adds no header line to what is sent, and a speech answer larger than a clip can be is
/// not read (nor posted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoints_own_seconds_are_charged_its_words_cut_and_nothing_a_member_writes_reaches_a_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scripted = Refusing::start(500).await;
    let words = "word ".repeat(2_000);
    let heard = serde_json::to_vec(&json!({"text": words, "duration": 41.2})).expect("json");
    scripted.answer(TRANSCRIPTIONS, 200, "application/json", heard);
    let huge = vec![0u8; richbot::speech::MAX_SPEECH_ANSWER + 1];
    scripted.answer("/v1/audio/speech", 200, "audio/ogg", huge);
    let extra_toml = format!(
        "[transcription]\nbase_url = \"{0}\"\nmax_seconds = 10\n\n[speech]\nbase_url = \"{0}\"\n\n\
         [budget]\naudio_seconds_per_day = 600\n\n\
         [[personas]]\nlocalpart = \"richbot\"\ndisplay_name = \"Richbot\"\nvoice_replies = true\n",
        scripted.base_url
    );
    let options = Options { extra_toml, personas: vec![("rb_helper", "Helper")], ..Default::default() };
    let env = Env::start_with(options).await;
    let room = env.dm().await;
    env.llm.respond_with(|_| text("Noted."));
    let clip = spoken(QUESTION, dir.path());
    let url = env.alice.upload(clip.clone(), "audio/ogg", "Voice message.ogg").await;
    let mut content = voice_content(Some(&url), clip.len(), 2_900);
    content["info"]["mimetype"] = "audio/ogg\r\nX-Injected: 1".into();
    env.alice.send(&room, "m.room.message", content).await;
    env.wait_turns(&room, 1).await;
    let posted = env.alice.messages_from(&room, BOT).await;
    assert_eq!(posted.len(), 1, "the text answer, and no voice answer from a speech answer too large: {posted:#?}");
    assert_eq!(posted[0]["content"]["body"], "Noted.");

    let sent = scripted.requests();
    let transcription = sent.iter().find(|r| r.starts_with(b"POST /v1/audio/transcriptions")).expect("sent");
    let text = String::from_utf8_lossy(transcription);
    assert!(!text.contains("X-Injected"), "no header line of the member's: {text:.600}");
    assert!(text.contains("Content-Type: application/octet-stream\r\n\r\nOggS"), "{text:.600}");
    let line = asked(&env, 0);
    let shown = line.split("s] ").nth(1).expect("the words");
    assert_eq!(shown.chars().count(), 10 * 40 + 1, "cut to 40 characters a second of max_seconds, with an ellipsis");
    env.alice.say(&room, "!usage").await;
    env.wait_messages(&room, BOT, 2).await;
    let usage = notices(&env.alice.messages_from(&room, BOT).await).pop().expect("a notice");
    assert!(usage.ends_with(" Voice messages: 42 s heard, of your 600 s a day."), "the endpoint's 41.2 s: {usage}");
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

/// Whether the model's line holds a voice message's words that are the question's.
fn heard_the_question(line: &str) -> bool {
    line.split("s] ").nth(1).is_some_and(holds_the_question)
}

/// A voice answer's audio as uploaded: Ogg Opus, of a plausible length for the answer
/// (what is checkable on any machine; what a speech model hears of synthetic speech is
/// not).
fn check_spoken_answer(audio: &[u8]) {
    assert_eq!(&audio[..4], b"OggS");
    let ms = richbot::speech::measure(audio).expect("Opus whose length is measured");
    assert!((1_000..20_000).contains(&ms), "{ms} ms");
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
    check_spoken_answer(&audio);
    assert_eq!(spoken_inputs(&log), [ANSWER], "the speech endpoint was asked to speak the answer");

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
    assert!(heard_the_question(&line), "the encrypted question was heard: {line}");
    let content = &answers[1]["content"];
    check_voice_answer(content);
    assert!(content.get("url").is_none(), "no clear URL in an encrypted room: {content:#}");
    let file = &content["file"];
    let (sealed, _) = env.alice.download(file["url"].as_str().expect("its URL")).await;
    assert_ne!(&sealed[..4], b"OggS", "stored encrypted");
    // AES-CTR: sealing again with the same key and IV opens it.
    let secret = richbot::media::Secret::of(file).expect("its key");
    let audio = richbot::media::seal(&sealed, &secret).0;
    check_spoken_answer(&audio);
    assert_eq!(spoken_inputs(&log), [ANSWER, ANSWER]);
    alice.stop().await;
    assert_eq!(requests_to(&log, "/v1/audio/speech"), 2);
    let metrics = env.metrics().await;
    assert_eq!(metric(&metrics, "richbot_voice_replies_total"), Some(2), "{metrics}");
}
