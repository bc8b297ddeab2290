//! The audio endpoint client against real speech: a question espeak-ng spoke, as Ogg Opus
//! (as Element records voice messages), comes back as its words from faster-whisper behind
//! OpenAI's transcription API; an answer spoken through the speech API is Ogg Opus that
//! transcribes back to its key words; a server that is down is an outage, and a wrong path
//! (404) is misconfiguration.

use std::time::Duration;

use richbot::speech::{Endpoint, Error};

use serde_json::json;

use crate::support::llm::text;
use crate::support::speech::{SpeechServer, spoken};
use crate::support::{BOT, Env, Options};

#[tokio::test]
async fn a_spoken_question_is_transcribed_and_an_answer_spoken_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = SpeechServer::start(&dir.path().join("speech.log")).await;
    let whisper = Endpoint::new(&server.base_url, "whisper-1", None, Duration::from_secs(120));
    let question = spoken("What is the weather in Lisbon right now?", dir.path());
    let heard = whisper.transcribe(question, "voice-message.ogg", "audio/ogg").await.expect("transcribed");
    assert_eq!(heard, "What is the weather in Lisbon right now?");

    let voice = Endpoint::new(&server.base_url, "tts-1", None, Duration::from_secs(120));
    let answer = voice.speak("The weather in Lisbon is sunny and warm today.", "alloy", "ogg").await.expect("spoken");
    assert_eq!(&answer[..4], b"OggS", "Ogg");
    let back = whisper.transcribe(answer, "answer.ogg", "audio/ogg").await.expect("transcribed");
    // espeak-ng is not a clear speaker: its "in Lisbon" came back as "enlisting"; the common
    // words come back.
    assert!(back.to_lowercase().contains("warm today"), "{back}");

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
    let audio = spoken("What is the weather in Lisbon right now?", dir.path());
    let size = audio.len();
    let url = env.alice.upload(audio, "audio/ogg", "Voice message.ogg").await;
    let voice = json!({
        "msgtype": "m.audio", "body": "Voice message.ogg", "url": url,
        "info": {"mimetype": "audio/ogg", "size": size, "duration": 2125},
        "org.matrix.msc3245.voice": {}, "org.matrix.msc1767.audio": {"duration": 2125},
    });
    env.alice.send(&room, "m.room.message", voice).await;
    env.wait_messages(&room, BOT, 1).await;
    let asked = env.llm.requests()[0]["messages"].as_array().and_then(|m| m.last()).cloned().expect("a question");
    let said = asked["content"].as_str().expect("text");
    assert!(said.ends_with("[voice message, 3 s] What is the weather in Lisbon right now?"), "{said}");

    // The next turn reads the kept words: no second transcription.
    env.alice.say(&room, "and tomorrow?").await;
    env.wait_messages(&room, BOT, 2).await;
    let history = env.llm.requests()[1]["messages"].to_string();
    assert!(history.contains("[voice message, 3 s] What is the weather in Lisbon right now?"), "{history}");
    let transcriptions = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("/audio/transcriptions"))
        .count();
    assert_eq!(transcriptions, 1);
}
