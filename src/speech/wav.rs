//! WAV clips (RIFF, PCM): their format and samples, read from the chunks. A WAV clip's
//! length is its data's size over its frame rate; the rate is what the sender wrote, but
//! it is also what any decoder plays the samples at, so the length measured is the length
//! a transcription endpoint hears. Only rates and sample sizes speech is recorded at are
//! taken: a rate of a few hertz would make minutes of samples pass for hours, and
//! megahertz make hours pass for seconds.

/// A WAV clip's format and its data.
pub(super) struct Wav<'a> {
    pub(super) channels: u16,
    pub(super) rate: u32,
    pub(super) bits: u16,
    pub(super) data: &'a [u8],
}

/// Frame rates taken, in hertz.
const RATES: std::ops::RangeInclusive<u32> = 8_000..=96_000;

impl<'a> Wav<'a> {
    /// The clip in `bytes`: `fmt ` before `data`, PCM of 8, 16, 24 or 32 bits, 1-8 channels,
    /// at a rate speech is recorded at.
    pub(super) fn read(bytes: &'a [u8]) -> Result<Self, &'static str> {
        if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
            return Err("it is not a WAV file");
        }
        let (mut at, mut format) = (12usize, None);
        while at + 8 <= bytes.len() {
            let id = &bytes[at..at + 4];
            let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]) as usize;
            // A data chunk may say it is longer than what came: only what came is sound.
            let body = &bytes[at + 8..at.saturating_add(8).saturating_add(len).min(bytes.len())];
            if id == b"fmt " && body.len() >= 16 {
                let channels = u16::from_le_bytes([body[2], body[3]]);
                let rate = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
                let bits = u16::from_le_bytes([body[14], body[15]]);
                format = Some((channels, rate, bits));
            } else if id == b"data" {
                let (channels, rate, bits) = format.ok_or("its data comes before its format")?;
                if !(1..=8).contains(&channels) || ![8, 16, 24, 32].contains(&bits) || !RATES.contains(&rate) {
                    return Err("its format is not one speech is recorded in");
                }
                return Ok(Self { channels, rate, bits, data: body });
            }
            at = at.saturating_add(8).saturating_add(len).saturating_add(len & 1);
        }
        Err("it has no sound")
    }

    /// The sound's length, in milliseconds.
    pub(super) fn measured_ms(&self) -> u64 {
        let frame = u64::from(self.channels) * u64::from(self.bits / 8);
        (self.data.len() as u64 / frame) * 1000 / u64::from(self.rate)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A WAV clip: `channels` at `rate` Hz, 16 bits, `data` as its sound.
    pub fn wav(channels: u16, rate: u32, data: &[u8]) -> Vec<u8> {
        let mut bytes = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        bytes.extend_from_slice(&16u32.to_le_bytes());
        bytes.extend_from_slice(&[1, 0]);
        bytes.extend_from_slice(&channels.to_le_bytes());
        bytes.extend_from_slice(&rate.to_le_bytes());
        bytes.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
        bytes.extend_from_slice(&(channels * 2).to_le_bytes());
        bytes.extend_from_slice(&16u16.to_le_bytes());
        bytes.extend_from_slice(b"data");
        bytes.extend_from_slice(&u32::try_from(data.len()).expect("small").to_le_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn a_clip_is_as_long_as_the_frames_it_holds_at_its_rate() {
        let clip = wav(2, 16_000, &[0; 64_000]);
        assert_eq!(Wav::read(&clip).map(|w| w.measured_ms()), Ok(1_000));
        // A data chunk that says it is longer than what came: what came.
        let mut short = wav(1, 8_000, &[0; 8_000]);
        short[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Wav::read(&short).map(|w| w.measured_ms()), Ok(500));
    }

    #[test]
    fn rates_and_formats_speech_is_not_recorded_in_are_refused() {
        for rate in [1, 7_999, 96_001, 4_000_000] {
            assert!(Wav::read(&wav(1, rate, &[0; 100])).is_err(), "{rate} Hz");
        }
        assert_eq!(Wav::read(b"RIFF\0\0\0\0WAVEdata\x04\0\0\0abcd").err(), Some("its data comes before its format"));
        assert_eq!(Wav::read(b"ID3").err(), Some("it is not a WAV file"));
    }
}
