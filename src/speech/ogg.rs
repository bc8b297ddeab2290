//! What a spoken answer's `m.audio` says of it: its length and a waveform (MSC3246:
//! about a hundred levels from 0 to 1024, which Element and nheko draw on the voice
//! message). Read from the bytes the speech endpoint gave, without decoding codecs:
//!
//! - **Ogg Opus** (what Element records, and `speech.format = "ogg"`): the length is the
//!   last page's granule position less the stream's pre-skip (48 kHz, RFC 7845). Opus
//!   packets grow with what they carry, so the waveform follows the packets' sizes:
//!   silence is small, speech large. It is an outline, not the signal's level.
//! - **WAV** (16-bit PCM): the length from the data's size; the waveform from each slice's
//!   root mean square level.
//!
//! Anything else (or a broken stream) gives neither, and the message goes without them.

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
    let mut packets: Vec<usize> = Vec::new();
    let (mut at, mut open, mut last_granule, mut pre_skip) = (0usize, 0usize, 0i64, None);
    let mut first_packet: Vec<u8> = Vec::new();
    while at + 27 <= bytes.len() {
        if &bytes[at..at + 4] != b"OggS" {
            return None;
        }
        let granule = i64::from_le_bytes(bytes[at + 6..at + 14].try_into().ok()?);
        let segments = usize::from(bytes[at + 26]);
        let table = bytes.get(at + 27..at + 27 + segments)?;
        let mut body = at + 27 + segments;
        for &lace in table {
            let lace = usize::from(lace);
            if packets.is_empty() && pre_skip.is_none() {
                first_packet.extend_from_slice(bytes.get(body..body + lace)?);
            }
            open += lace;
            body += lace;
            if lace < 255 {
                if pre_skip.is_none() {
                    // The first packet is the OpusHead: its pre-skip is at bytes 10-11.
                    if !first_packet.starts_with(b"OpusHead") || first_packet.len() < 12 {
                        return None;
                    }
                    pre_skip = Some(i64::from(u16::from_le_bytes([first_packet[10], first_packet[11]])));
                } else {
                    packets.push(open);
                }
                open = 0;
            }
        }
        if granule >= 0 {
            last_granule = granule;
        }
        at = body;
    }
    let samples = (last_granule - pre_skip?).max(0);
    // The second packet is OpusTags, not sound.
    let sizes: Vec<f64> = packets.iter().skip(1).map(|&n| n as f64).collect();
    Some(Shape { duration_ms: Some(u64::try_from(samples / 48).ok()?), waveform: levels(&sizes) })
}

fn wav(bytes: &[u8]) -> Option<Shape> {
    let (mut at, mut format) = (12usize, None);
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
        let body = bytes.get(at + 8..(at + 8 + len).min(bytes.len()))?;
        if id == b"fmt " && body.len() >= 16 {
            let channels = u16::from_le_bytes([body[2], body[3]]);
            let rate = u32::from_le_bytes(body[4..8].try_into().ok()?);
            let bits = u16::from_le_bytes([body[14], body[15]]);
            format = Some((channels.max(1), rate.max(1), bits));
        } else if id == b"data" {
            let (channels, rate, bits) = format?;
            if bits != 16 {
                return None;
            }
            let samples: Vec<f64> =
                body.chunks_exact(2).map(|b| f64::from(i16::from_le_bytes([b[0], b[1]])).abs()).collect();
            let frames = samples.len() as u64 / u64::from(channels);
            let rms =
                slices(&samples).into_iter().map(|s| (s.iter().map(|x| x * x).sum::<f64>() / s.len() as f64).sqrt());
            return Some(Shape {
                duration_ms: Some(frames * 1000 / u64::from(rate)),
                waveform: levels(&rms.collect::<Vec<_>>()),
            });
        }
        at += 8 + len + (len & 1);
    }
    None
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
    use super::*;

    /// One Ogg page: `granule`, the packets (each under 255 bytes) laced in.
    fn page(granule: i64, packets: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"OggS\0\0".to_vec();
        out.extend_from_slice(&granule.to_le_bytes());
        out.extend_from_slice(&[0; 12]);
        out.push(packets.len() as u8);
        out.extend(packets.iter().map(|p| p.len() as u8));
        for p in packets {
            out.extend_from_slice(p);
        }
        out
    }

    #[test]
    fn an_opus_stream_is_as_long_as_its_last_granule_less_the_pre_skip_and_its_waveform_follows_packet_sizes() {
        let mut head = b"OpusHead\x01\x01".to_vec();
        head.extend_from_slice(&312u16.to_le_bytes());
        head.extend_from_slice(&[0; 7]);
        let mut bytes = page(0, &[head]);
        bytes.extend(page(0, &[b"OpusTags".to_vec()]));
        bytes.extend(page(48_000, &[vec![0; 10], vec![0; 200]]));
        bytes.extend(page(96_312, &[vec![0; 100]]));
        let shape = shape(&bytes);
        assert_eq!(shape.duration_ms, Some(2_000));
        assert_eq!(shape.waveform, vec![51, 1024, 512]);
    }

    #[test]
    fn a_wav_clip_is_as_long_as_its_frames_and_its_waveform_is_each_slices_level() {
        let mut data = Vec::new();
        for i in 0..16_000 {
            let level: i16 = if i < 8_000 { 100 } else { 1_000 };
            data.extend_from_slice(&(if i % 2 == 0 { level } else { -level }).to_le_bytes());
        }
        let mut bytes = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        bytes.extend_from_slice(&16u32.to_le_bytes());
        bytes.extend_from_slice(&[1, 0, 1, 0]);
        bytes.extend_from_slice(&16_000u32.to_le_bytes());
        bytes.extend_from_slice(&32_000u32.to_le_bytes());
        bytes.extend_from_slice(&[2, 0, 16, 0]);
        bytes.extend_from_slice(b"data");
        bytes.extend_from_slice(&(data.len() as u32).to_le_bytes());
        bytes.extend(data);
        let shape = shape(&bytes);
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
