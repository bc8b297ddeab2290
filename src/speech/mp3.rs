//! MP3 files (MPEG-1, 2 and 2.5 audio, layers I-III): the audio they hold, summed frame by
//! frame from each frame's header (its samples per frame over its sample rate), without
//! decoding. A leading ID3v2 tag and a trailing ID3v1 tag are skipped; anything else that
//! is not a frame ends the count, and more than a little of it makes the file one richbot
//! cannot measure (a decoder would resynchronise past it and play what follows).

/// Bytes after the last frame taken as a trailing tag or padding.
const TRAILING: usize = 4 * 1024;

/// Kilobits a second, by version (MPEG-1 or not) and layer, for bitrate indexes 1-14.
const BITRATES: [[[u32; 14]; 3]; 2] = [
    [
        [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
        [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
        [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
    ],
    [
        [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
        [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
        [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    ],
];

/// One frame's header: its length in bytes, and its samples and rate.
struct Frame {
    len: usize,
    samples: u64,
    rate: u64,
}

fn frame(h: &[u8]) -> Option<Frame> {
    if h.len() < 4 || h[0] != 0xFF || h[1] & 0xE0 != 0xE0 {
        return None;
    }
    let version = (h[1] >> 3) & 3; // 0: MPEG-2.5, 2: MPEG-2, 3: MPEG-1
    let layer = (h[1] >> 1) & 3; // 1: III, 2: II, 3: I
    let (bitrate, rate_index, padding) = (usize::from(h[2] >> 4), usize::from((h[2] >> 2) & 3), (h[2] >> 1) & 1);
    if version == 1 || layer == 0 || !(1..=14).contains(&bitrate) || rate_index == 3 {
        return None;
    }
    let mpeg1 = version == 3;
    let layer_at = usize::from(3 - layer); // 0: I, 1: II, 2: III
    let kbps = u64::from(BITRATES[usize::from(!mpeg1)][layer_at][bitrate - 1]);
    let rate = [44_100u64, 48_000, 32_000][rate_index] >> [2, 0, 1, 0][usize::from(version)];
    let samples: u64 = match (layer_at, mpeg1) {
        (0, _) => 384,
        (1, _) | (2, true) => 1_152,
        _ => 576,
    };
    let len = if layer_at == 0 {
        (12 * kbps * 1000 / rate + u64::from(padding)) * 4
    } else {
        samples / 8 * kbps * 1000 / rate + u64::from(padding)
    };
    Some(Frame { len: usize::try_from(len).ok()?, samples, rate })
}

/// The audio an MP3 file holds, in milliseconds.
pub(super) fn measured_ms(bytes: &[u8]) -> Result<u64, &'static str> {
    let mut at = 0usize;
    if bytes.starts_with(b"ID3") && bytes.len() >= 10 {
        // A synchsafe size: seven bits a byte.
        let size = bytes[6..10].iter().fold(0usize, |n, b| (n << 7) | usize::from(b & 0x7f));
        at = 10 + size + if bytes[5] & 0x10 != 0 { 10 } else { 0 };
    }
    let (mut ms_sum, mut frames) = (0f64, 0u32);
    while let Some(f) = bytes.get(at..).and_then(frame) {
        if f.len < 4 {
            return Err("a frame of it is broken");
        }
        ms_sum += f.samples as f64 * 1000.0 / f.rate as f64;
        frames += 1;
        at += f.len;
    }
    if frames == 0 {
        return Err("it is not an MP3 file");
    }
    if bytes.len().saturating_sub(at) > TRAILING {
        return Err("it holds more than its frames");
    }
    Ok(ms_sum as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An MPEG-1 layer III frame header at `kbps` and 44.1 kHz (index 0), no padding, and
    /// its body.
    fn frame_of(bitrate_index: u8) -> Vec<u8> {
        let header = [0xFF, 0xFB, bitrate_index << 4, 0xC4];
        let f = frame(&header).expect("a frame");
        let mut bytes = header.to_vec();
        bytes.resize(f.len, 0);
        bytes
    }

    #[test]
    fn an_mp3_is_as_long_as_its_frames_say_each() {
        // 128 kbps at 44.1 kHz: 417 bytes and 1,152 samples (26.12 ms) a frame.
        assert_eq!(frame_of(9).len(), 417);
        let mut bytes = b"ID3\x04\0\0\0\0\0\x05hello".to_vec();
        for _ in 0..100 {
            bytes.extend(frame_of(9));
        }
        bytes.extend(b"TAG");
        bytes.resize(bytes.len() + 125, 0);
        assert_eq!(measured_ms(&bytes), Ok(2_612));
    }

    #[test]
    fn a_file_hiding_more_after_its_frames_or_none_is_not_measured() {
        let mut hiding = frame_of(9);
        hiding.extend(vec![0x42; 10_000]);
        hiding.extend(frame_of(9));
        assert_eq!(measured_ms(&hiding), Err("it holds more than its frames"));
        assert_eq!(measured_ms(b"not a frame at all"), Err("it is not an MP3 file"));
    }
}
