//! The audio endpoint client against real speech: a question espeak-ng spoke, as Ogg Opus
//! (as Element records voice messages), comes back as its words from faster-whisper behind
//! OpenAI's transcription API; an answer spoken through the speech API is Ogg Opus that
//! transcribes back to its key words; a server that is down is an outage, and a wrong path
//! (404) is misconfiguration.

use std::time::Duration;

use richbot::speech::{Endpoint, Error};

use crate::support::speech::{SpeechServer, spoken};

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
