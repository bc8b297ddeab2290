//! The audio endpoint client against real speech: a question espeak-ng spoke, as Ogg Opus
//! (as Element records voice messages), comes back as its key words from faster-whisper
//! behind OpenAI's transcription API; an answer spoken through the speech API is Ogg Opus
//! of a plausible length for it; a server that is down is an outage, and a wrong path
//! (404) is misconfiguration.

use std::time::Duration;

use richbot::speech::{Endpoint, Error};

use serde_json::json;

use crate::support::llm::text;
use crate::support::speech::{QUESTION, SpeechServer, holds_the_question, send_voice, spoken, spoken_inputs};
use crate::support::{BOT, Env, Options, enc};

#[tokio::test]
async fn a_spoken_question_is_transcribed_and_an_answer_spoken_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("speech.log");
    let server = SpeechServer::start(&log).await;
    let whisper = Endpoint::new(&server.base_url, "whisper-1", None, Duration::from_secs(120));
    let question = spoken(QUESTION, dir.path());
    let heard = whisper.transcribe(question, "voice-message.ogg", "audio/ogg").await.expect("transcribed");
    assert!(holds_the_question(&heard.text), "{heard:?}");
    let seconds = heard.seconds.expect("the server says what it heard");
    assert!((1.0..10.0).contains(&seconds), "{seconds} s");

    // What is checkable on any machine: the server was asked to speak the answer, and it
    // gave Ogg Opus of a plausible length for it.
    let voice = Endpoint::new(&server.base_url, "tts-1", None, Duration::from_secs(120));
    let said = "The weather in Lisbon is sunny and warm today.";
    let answer = voice.speak(said, "alloy", "ogg").await.expect("spoken");
    assert_eq!(&answer[..4], b"OggS", "Ogg");
    let ms = richbot::speech::measure(&answer).expect("Opus whose length is measured");
    assert!((1_000..20_000).contains(&ms), "{ms} ms");
    assert_eq!(spoken_inputs(&log), [said]);

    let wrong = Endpoint::new(&server.base_url.replace("/v1", "/v2"), "whisper-1", None, Duration::from_secs(30));
    let refused = wrong.transcribe(b"OggS".to_vec(), "a.ogg", "audio/ogg").await;
    assert!(matches!(refused, Err(Error::Misconfigured(404, _))), "{refused:?}");
    let port = crate::support::synapse::free_port();
    let down = Endpoint::new(&format!("http://127.0.0.1:{port}/v1"), "whisper-1", None, Duration::from_secs(30));
    let failed = down.transcribe(b"OggS".to_vec(), "a.ogg", "audio/ogg").await;
    assert!(matches!(failed, Err(Error::Failed(_))), "{failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_message_in_a_dm_reaches_the_model_as_its_words_and_is_transcribed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("speech.log");
    let server = SpeechServer::start(&log).await;
    let extra_toml = format!("[transcription]\nbase_url = \"{}\"\nmodel = \"whisper-1\"\n", server.base_url);
    let env = Env::start_with(Options { extra_toml, ..Default::default() }).await;
    let room = env.dm().await;
    env.llm.respond_with(|_| text("It is sunny in Lisbon."));
    let audio = spoken(QUESTION, dir.path());
    let voice_id = send_voice(&env.alice, &room, audio, 2125).await;
    env.wait_messages(&room, BOT, 1).await;
    let asked = env.llm.requests()[0]["messages"].as_array().and_then(|m| m.last()).cloned().expect("a question");
    let said = asked["content"].as_str().expect("text");
    let words = said.split("[voice message, 3 s] ").nth(1).unwrap_or_else(|| panic!("{said}"));
    assert!(holds_the_question(words), "{said}");

    // The next turn reads the kept words: no second transcription.
    env.alice.say(&room, "and tomorrow?").await;
    env.wait_messages(&room, BOT, 2).await;
    let history = env.llm.requests()[1]["messages"].to_string();
    assert!(history.contains(&format!("[voice message, 3 s] {words}")), "{history}");
    let transcriptions = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("/audio/transcriptions"))
        .count();
    assert_eq!(transcriptions, 1);

    // Redacted, its words go too.
    let store = env.store().await;
    let (room_id, event_id) = (crate::support::room_id(&room), ruma::OwnedEventId::try_from(voice_id).expect("id"));
    let kept = store.transcripts(&room_id, &[&event_id]).await.expect("transcripts");
    assert_eq!(kept.len(), 1, "kept until then");
    let path = format!("/_matrix/client/v3/rooms/{}/redact/{}/regret", enc(&room), enc(event_id.as_str()));
    let (status, _) = env.alice.call(reqwest::Method::PUT, &path, Some(json!({}))).await;
    assert_eq!(status, 200);
    crate::support::eventually("the words go with the redaction", Duration::from_secs(60), || async {
        store.transcripts(&room_id, &[&event_id]).await.expect("transcripts").is_empty().then_some(())
    })
    .await;
}

/// A config whose homeserver and LLM are nowhere, with `audio` appended.
fn check_config(dir: &std::path::Path, audio: &str) -> richbot::config::Settings {
    read_config(dir, audio).expect("valid")
}

fn read_config(dir: &std::path::Path, audio: &str) -> Result<richbot::config::Settings, richbot::config::Error> {
    std::fs::write(
        dir.join("registration.yaml"),
        "id: richbot\nurl: \"http://127.0.0.1:9009\"\nas_token: as_token_long_enough_to_be_real\nhs_token: hs_token_long_enough_to_be_real\n\
         sender_localpart: richbot\nnamespaces:\n  users: [{exclusive: true, regex: '@richbot_.*:localhost'}]\n",
    )
    .expect("registration");
    let text = format!(
        "[homeserver]\nurl = \"http://127.0.0.1:9\"\nserver_name = \"localhost\"\n[appservice]\nregistration = \"registration.yaml\"\n\
         listen = \"127.0.0.1:9009\"\n[database]\nurl = \"sqlite://richbot.db\"\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n{audio}"
    );
    let path = dir.join("richbot.toml");
    richbot::config::from_str(&text, &path, dir, std::iter::empty())
}

#[test]
fn the_audio_sections_keys_fall_back_to_the_llm_key_only_on_its_url_and_mistakes_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("tts.key"), "tts-secret\n").expect("key file");
    let settings = check_config(
        dir.path(),
        "api_key = \"llm-secret\"\n[transcription]\nbase_url = \"http://127.0.0.1:9/v1\"\n\
         [speech]\nbase_url = \"http://127.0.0.1:8/v1\"\napi_key_file = \"tts.key\"\n",
    );
    assert_eq!(settings.audio_keys.transcription.as_deref(), Some("llm-secret"), "[llm]'s URL: its key");
    assert_eq!(settings.audio_keys.speech.as_deref(), Some("tts-secret"), "its own file, trimmed");
    assert!(!format!("{settings:?}").contains("secret"), "Debug leaves the keys out");
    let other =
        check_config(dir.path(), "api_key = \"llm-secret\"\n[transcription]\nbase_url = \"http://127.0.0.1:7/v1\"\n");
    assert_eq!(other.audio_keys.transcription, None, "[llm]'s key is never sent elsewhere");

    let wrong = read_config(
        dir.path(),
        "[transcription]\nbase_url = \"ftp://x/v1\"\nmax_seconds = 0\nmax_bytes = 10\ntimeout_secs = 0\n\
         [speech]\nbase_url = \"http://x/v2\"\nformat = \"mp3\"\n",
    );
    let Err(richbot::config::Error::Invalid(problems)) = wrong else { panic!("invalid") };
    let keys: Vec<&str> = problems.iter().filter_map(|p| p.split(':').next()).collect();
    assert_eq!(
        keys,
        [
            "transcription.base_url",
            "transcription.max_seconds",
            "transcription.max_bytes",
            "transcription.timeout_secs",
            "speech.base_url",
            "speech.format"
        ],
        "{problems:#?}"
    );
}

#[tokio::test]
async fn check_says_whether_the_audio_endpoints_answer_and_with_model_hears_its_built_in_clip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = SpeechServer::start(&dir.path().join("speech.log")).await;
    let refusing = crate::support::speech::Refusing::start(401).await;
    let audio = format!(
        "[transcription]\nbase_url = \"{}\"\n[speech]\nbase_url = \"{}\"\n",
        server.base_url, refusing.base_url
    );
    let settings = check_config(dir.path(), &audio);
    let line = |lines: &[richbot::check::Line], name: &str| {
        lines.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("a {name} line: {lines:#?}")).to_string()
    };
    let lines = richbot::check::run(&settings, false).await;
    assert_eq!(
        line(&lines, "transcription"),
        format!("ok   transcription: {}/audio/transcriptions answers (HTTP 400 to an empty request)", server.base_url)
    );
    let speech = line(&lines, "speech");
    assert!(speech.starts_with("FAIL speech: ") && speech.contains("HTTP 401"), "{speech}");

    let lines = richbot::check::run(&settings, true).await;
    let heard = line(&lines, "transcription");
    let said = format!("ok   transcription: heard the built-in clip as \"{}\" in ", richbot::check::CLIP_WORDS);
    assert!(heard.starts_with(&said), "{heard}");

    let none = richbot::check::run(&check_config(dir.path(), ""), false).await;
    assert!(none.iter().all(|l| l.name != "transcription" && l.name != "speech"), "no line for what is not set");
}
