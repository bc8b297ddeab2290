//! How long a clip really is, measured from what its bytes hold, never from what its
//! sender says of it (`info.duration`, or an Ogg page's granule position, both numbers a
//! sender writes as it likes: a 739 KB Ogg Opus file that claimed 1 s held an hour of
//! speech). Measured without decoding:
//!
//! - **Ogg Opus** (what Element and most clients record): each packet's TOC byte
//!   (`ogg`);
//! - **WAV**: its data's size at its rate (`wav`);
//! - **MP3**: each frame's header (`mp3`).
//!
//! Anything else is refused: a transcription endpoint would hear whatever it holds, and
//! richbot could not bound it. A coarse second guard bounds the bytes a clip may have per
//! second ([`most_bytes`]), so what is fetched at all is in proportion to the seconds
//! allowed.

use super::{mp3, ogg::OpusStream, wav::Wav};

/// The audio in `bytes`, in milliseconds, or why it cannot be measured.
pub fn measure(bytes: &[u8]) -> Result<u64, String> {
    let measured = if bytes.starts_with(b"OggS") {
        OpusStream::read(bytes).and_then(|s| s.measured_ms())
    } else if bytes.starts_with(b"RIFF") {
        Wav::read(bytes).map(|w| w.measured_ms())
    } else if bytes.starts_with(b"ID3") || bytes.first() == Some(&0xFF) {
        mp3::measured_ms(bytes)
    } else {
        return Err(UNKNOWN.to_owned());
    };
    measured.map_err(str::to_owned)
}

/// Why a clip of another kind is not heard.
pub const UNKNOWN: &str = "it is not Ogg Opus, WAV or MP3, the kinds of audio whose length can be measured";

/// Bytes a second of audio takes at most: uncompressed PCM (48 kHz, 32 bits, two
/// channels, richer than speech is recorded), or compressed (Opus's highest bitrate,
/// 510 kbit/s, above MP3's 320).
const PCM_BYTES_PER_SECOND: u64 = 48_000 * 4 * 2;
const COMPRESSED_BYTES_PER_SECOND: u64 = 64_000;
/// Bytes of headers and tags a clip may have besides its sound.
const SLACK: u64 = 64 * 1024;

/// The most bytes a clip of type `mime` (as its sender says; only a bound is taken from
/// it) may take for `seconds` of audio.
pub fn most_bytes(mime: &str, seconds: u64) -> u64 {
    let pcm = ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"].contains(&mime);
    let rate = if pcm { PCM_BYTES_PER_SECOND } else { COMPRESSED_BYTES_PER_SECOND };
    seconds.max(1).saturating_mul(rate).saturating_add(SLACK)
}

#[cfg(test)]
mod tests {
    use super::super::ogg::tests::{headers, packet, page};
    use super::super::wav::tests::wav;
    use super::*;

    #[test]
    fn a_clip_claiming_one_second_is_measured_by_what_it_holds() {
        // 3,600 s of 20 ms CELT packets (a pre-skip of 312 samples) in pages that each say
        // they end at one second.
        let mut lying = headers(312);
        for _ in 0..3_600 {
            let second: Vec<Vec<u8>> = (0..50).map(|_| packet(19 << 3, 0, 4)).collect();
            lying.extend(page(7, &second));
        }
        assert_eq!(measure(&lying), Ok((3_600 * 50 * 960 - 312) / 48));
        assert_eq!(measure(&wav(1, 16_000, &[0; 32_000])), Ok(1_000));
        assert_eq!(measure(b"\0\0\0\x20ftypM4A ").unwrap_err(), UNKNOWN);
    }

    #[test]
    fn the_bytes_a_second_may_take_are_bounded_by_kind() {
        assert_eq!(most_bytes("audio/ogg", 1), 64_000 + 65_536);
        assert_eq!(most_bytes("audio/ogg", 0), most_bytes("audio/ogg", 1));
        assert_eq!(most_bytes("audio/wav", 10), 3_840_000 + 65_536);
        assert_eq!(most_bytes("audio/ogg", u64::MAX), u64::MAX);
    }
}
