//! What a spoken answer's `m.audio` says of it: its length and a waveform (MSC3246:
//! about a hundred levels from 0 to 1024, which Element and nheko draw on the voice
//! message). Read from the bytes the speech endpoint gave, without decoding codecs:
//!
//! - **Ogg Opus** (what Element records, and `speech.format = "ogg"`): the length is what
//!   the packets hold (`length`). Opus packets grow with what they carry, so the waveform
//!   follows the packets' sizes: silence is small, speech large. It is an outline, not
//!   the signal's level.
//! - **WAV** (16-bit PCM): the length from the data's size; the waveform from each slice's
//!   root mean square level.
//!
//! Anything else (or a broken stream) gives neither, and the message goes without them.

use super::ogg::OpusStream;
use super::wav::Wav;

/// How many levels a waveform has at most.
const LEVELS: usize = 100;

/// A clip's length (milliseconds) and waveform, where they could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    pub duration_ms: Option<u64>,
    pub waveform: Vec<u16>,
}

/// The shape of `bytes`, an Ogg Opus or WAV clip.
pub fn shape(bytes: &[u8]) -> Shape {
    if bytes.starts_with(b"OggS") {
        opus(bytes).unwrap_or_default()
    } else if bytes.starts_with(b"RIFF") {
        wav(bytes).unwrap_or_default()
    } else {
        Shape::default()
    }
}

fn opus(bytes: &[u8]) -> Option<Shape> {
    let stream = OpusStream::read(bytes).ok()?;
    let sizes: Vec<f64> = stream.packets.iter().map(|p| p.size as f64).collect();
    Some(Shape { duration_ms: stream.measured_ms().ok(), waveform: levels(&sizes) })
}

fn wav(bytes: &[u8]) -> Option<Shape> {
    let clip = Wav::read(bytes).ok().filter(|w| w.bits == 16)?;
    let samples: Vec<f64> =
        clip.data.chunks_exact(2).map(|b| f64::from(i16::from_le_bytes([b[0], b[1]])).abs()).collect();
    let rms = slices(&samples).into_iter().map(|s| (s.iter().map(|x| x * x).sum::<f64>() / s.len() as f64).sqrt());
    Some(Shape { duration_ms: Some(clip.measured_ms()), waveform: levels(&rms.collect::<Vec<_>>()) })
}

/// `values` cut into at most [`LEVELS`] slices of (nearly) equal length.
fn slices(values: &[f64]) -> Vec<&[f64]> {
    let n = values.len().clamp(1, LEVELS);
    let size = values.len().div_ceil(n).max(1);
    values.chunks(size).collect()
}

/// `values` averaged into at most [`LEVELS`] levels, scaled so the loudest is 1024.
fn levels(values: &[f64]) -> Vec<u16> {
    if values.is_empty() {
        return Vec::new();
    }
    let means: Vec<f64> = slices(values).into_iter().map(|s| s.iter().sum::<f64>() / s.len() as f64).collect();
    let top = means.iter().copied().fold(0.0, f64::max);
    if top <= 0.0 {
        return vec![0; means.len()];
    }
    means.iter().map(|m| (m / top * 1024.0).round() as u16).collect()
}

#[cfg(test)]
mod tests {
    use super::super::ogg::tests::{headers, packet, page};
    use super::super::wav::tests::wav as wav_clip;
    use super::*;

    #[test]
    fn an_opus_streams_length_is_what_its_packets_hold_and_its_waveform_follows_their_sizes() {
        let mut bytes = headers(312);
        bytes.extend(page(7, &[packet(19 << 3, 0, 10), packet(19 << 3, 0, 200)]));
        bytes.extend(page(7, &[packet((19 << 3) | 1, 0, 100)]));
        let shape = shape(&bytes);
        assert_eq!(shape.duration_ms, Some((960 * 4 - 312) / 48));
        assert_eq!(shape.waveform, vec![51, 1024, 512]);
    }

    #[test]
    fn a_wav_clip_is_as_long_as_its_frames_and_its_waveform_is_each_slices_level() {
        let mut data = Vec::new();
        for i in 0..16_000 {
            let level: i16 = if i < 8_000 { 100 } else { 1_000 };
            data.extend_from_slice(&(if i % 2 == 0 { level } else { -level }).to_le_bytes());
        }
        let shape = shape(&wav_clip(1, 16_000, &data));
        assert_eq!(shape.duration_ms, Some(1_000));
        assert_eq!(shape.waveform.len(), 100);
        assert_eq!((shape.waveform[0], shape.waveform[99]), (102, 1024));
    }

    #[test]
    fn anything_else_has_no_shape() {
        assert_eq!(shape(b"ID3 not a clip"), Shape::default());
        assert_eq!(shape(b"OggS broken"), Shape::default());
    }
}
