//! Ogg Opus streams read without decoding (RFC 3533 pages, RFC 7845 encapsulation,
//! RFC 6716 packets): the packets' sizes (a voice message's waveform outline) and the
//! audio they hold, summed from each packet's TOC byte. The pages' granule positions,
//! which a sender writes as it likes, are never read for a length.

/// One Opus audio packet, as much of it as its length needs: its size and its first two
/// bytes (the TOC byte, and the frame count of a code 3 packet).
#[derive(Debug, Clone, Copy)]
pub(super) struct Packet {
    pub(super) size: usize,
    head: [u8; 2],
}

impl Packet {
    /// How many 48 kHz samples the packet holds, by its TOC byte (RFC 6716 §3.1): its
    /// configuration gives each frame's length, its code the number of frames. `None`
    /// for a packet no decoder takes (a code 3 packet of no frames, or over 120 ms).
    pub(super) fn samples(&self) -> Option<u64> {
        if self.size == 0 {
            // RFC 7845 §3: a zero-length packet is a lost one, no audio.
            return Some(0);
        }
        let [toc, count] = self.head;
        let config = usize::from(toc >> 3);
        let frame = match config {
            0..=11 => [480, 960, 1920, 2880][config % 4],
            12..=15 => [480, 960][config % 2],
            _ => [120, 240, 480, 960][config % 4],
        };
        let frames = match toc & 3 {
            0 => 1,
            1 | 2 => 2,
            _ if self.size < 2 => return None,
            _ => u64::from(count & 0x3f),
        };
        let samples = frame * frames;
        // At most 120 ms a packet (5,760 samples), and at least one frame.
        (frames > 0 && samples <= 5_760).then_some(samples)
    }
}

/// Why an Ogg stream's length could not be measured.
pub(super) type Broken = &'static str;

/// A packet being read: its size so far and its first bytes (enough of a header for its
/// magic and the pre-skip, enough of an audio packet for its TOC).
#[derive(Default)]
struct Reading {
    size: usize,
    first: Vec<u8>,
}

/// The first bytes of a packet kept while reading.
const KEPT: usize = 19;

/// An Ogg Opus stream's audio packets and pre-skip, read from its pages (RFC 3533,
/// RFC 7845): one logical stream, the `OpusHead` and `OpusTags` headers first. The
/// pages' granule positions are not read: they are numbers the sender writes.
pub(super) struct OpusStream {
    pre_skip: u64,
    pub(super) packets: Vec<Packet>,
}

impl OpusStream {
    pub(super) fn read(bytes: &[u8]) -> Result<Self, Broken> {
        let (mut at, mut serial) = (0usize, None);
        let (mut done, mut pre_skip, mut packets) = (0usize, 0u64, Vec::new());
        let mut reading = Reading::default();
        while at < bytes.len() {
            let page = bytes.get(at..at + 27).ok_or("it ends inside a page header")?;
            if &page[..4] != b"OggS" {
                return Err("it is not an Ogg stream throughout");
            }
            if *serial.get_or_insert(&page[14..18]) != &page[14..18] {
                return Err("it holds more than one stream");
            }
            let segments = usize::from(page[26]);
            let table = bytes.get(at + 27..at + 27 + segments).ok_or("it ends inside a page header")?;
            let mut body = at + 27 + segments;
            for &lace in table {
                let lace = usize::from(lace);
                let piece = bytes.get(body..body + lace).ok_or("it ends inside a packet")?;
                let wanted = KEPT.saturating_sub(reading.first.len()).min(piece.len());
                reading.first.extend_from_slice(&piece[..wanted]);
                reading.size += lace;
                body += lace;
                if lace == 255 {
                    continue;
                }
                let packet = std::mem::take(&mut reading);
                match done {
                    0 if packet.first.starts_with(b"OpusHead") && packet.first.len() >= 12 => {
                        pre_skip = u64::from(u16::from_le_bytes([packet.first[10], packet.first[11]]));
                    }
                    0 => return Err("it is not Opus"),
                    1 if packet.first.starts_with(b"OpusTags") => {}
                    1 => return Err("its Opus headers are broken"),
                    _ => {
                        let head =
                            [packet.first.first().copied().unwrap_or(0), packet.first.get(1).copied().unwrap_or(0)];
                        packets.push(Packet { size: packet.size, head });
                    }
                }
                done += 1;
            }
            at = body;
        }
        if done < 2 {
            return Err("it has no Opus headers");
        }
        Ok(Self { pre_skip, packets })
    }

    /// The audio the packets hold, in milliseconds, less the pre-skip; `Err` when a packet
    /// is one no decoder takes.
    pub(super) fn measured_ms(&self) -> Result<u64, Broken> {
        let mut samples = 0u64;
        for p in &self.packets {
            samples += p.samples().ok_or("a packet of it is not valid Opus")?;
        }
        Ok(samples.saturating_sub(self.pre_skip) / 48)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// One Ogg page of stream `serial`: the packets laced in (a packet of 255 bytes or more
    /// takes several lacing values).
    pub fn page(serial: u32, packets: &[Vec<u8>]) -> Vec<u8> {
        let mut lacing = Vec::new();
        for p in packets {
            lacing.extend(std::iter::repeat_n(255u8, p.len() / 255));
            lacing.push((p.len() % 255) as u8);
        }
        let mut out = b"OggS\0\0".to_vec();
        // A granule position that lies: it says nothing of the length here.
        out.extend_from_slice(&1_000_000i64.to_le_bytes());
        out.extend_from_slice(&serial.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.push(u8::try_from(lacing.len()).expect("one page"));
        out.extend(lacing);
        for p in packets {
            out.extend_from_slice(p);
        }
        out
    }

    /// The two Opus headers, with a pre-skip of `pre_skip` samples.
    pub fn headers(pre_skip: u16) -> Vec<u8> {
        let mut head = b"OpusHead\x01\x01".to_vec();
        head.extend_from_slice(&pre_skip.to_le_bytes());
        head.extend_from_slice(&[0; 7]);
        let mut bytes = page(7, &[head]);
        bytes.extend(page(7, &[b"OpusTags\0\0\0\0\0\0\0\0".to_vec()]));
        bytes
    }

    /// An audio packet: its TOC byte, then `len - 1` more bytes (the first of them the frame
    /// count, for code 3).
    pub fn packet(toc: u8, count: u8, len: usize) -> Vec<u8> {
        let mut p = vec![toc, count];
        p.resize(len.max(1), 0x55);
        p.truncate(len.max(1));
        p
    }

    #[test]
    fn each_packets_length_is_read_from_its_toc_byte() {
        let samples = |toc: u8, count: u8, len: usize| Packet { size: len, head: [toc, count] }.samples();
        // SILK 10/20/40/60 ms, hybrid 10/20 ms, CELT 2.5/5/10/20 ms; one frame (code 0).
        let configs = [(0, 480), (1, 960), (2, 1_920), (3, 2_880), (12, 480), (13, 960), (16, 120), (19, 960)];
        for (config, want) in configs {
            assert_eq!(samples(config << 3, 0, 40), Some(want), "config {config}");
        }
        assert_eq!(samples((19 << 3) | 1, 0, 40), Some(1_920), "code 1: two frames");
        assert_eq!(samples((19 << 3) | 2, 0, 40), Some(1_920), "code 2: two frames");
        assert_eq!(samples((16 << 3) | 3, 48, 40), Some(5_760), "code 3: 48 frames of 2.5 ms");
        assert_eq!(samples((19 << 3) | 3, 7, 40), None, "code 3 over 120 ms: no decoder takes it");
        assert_eq!(samples((19 << 3) | 3, 0, 40), None, "code 3 of no frames");
        assert_eq!(samples((19 << 3) | 3, 2, 1), None, "code 3 without its count byte");
        assert_eq!(samples(0, 0, 0), Some(0), "a lost packet");
    }

    #[test]
    fn a_stream_holds_its_packets_audio_less_the_pre_skip_whatever_its_granules_say() {
        let mut bytes = headers(312);
        // 20 ms CELT packets, one of them over 255 bytes (laced across values).
        bytes.extend(page(7, &[packet(19 << 3, 0, 60), packet(19 << 3, 0, 300)]));
        bytes.extend(page(7, &[packet((19 << 3) | 1, 0, 80)]));
        let stream = OpusStream::read(&bytes).expect("read");
        assert_eq!(stream.packets.iter().map(|p| p.size).collect::<Vec<_>>(), [60, 300, 80]);
        assert_eq!(stream.measured_ms(), Ok((960 * 4 - 312) / 48));
    }

    #[test]
    fn what_is_not_one_opus_stream_is_not_measured() {
        let mut two = headers(0);
        two.extend(page(8, &[packet(0, 0, 10)]));
        let mut vorbis = page(7, &[b"\x01vorbis".to_vec()]);
        vorbis.extend(page(7, &[b"\x03vorbis".to_vec()]));
        let mut cut = headers(0);
        cut.extend(&page(7, &[packet(0, 0, 100)])[..60]);
        let mut junk = headers(0);
        junk.extend(b"ID3 and then something else");
        let cases: [(&[u8], &str); 5] = [
            (&two, "it holds more than one stream"),
            (&vorbis, "it is not Opus"),
            (&cut, "it ends inside a packet"),
            (&junk, "it is not an Ogg stream throughout"),
            (&headers(0)[..20], "it ends inside a page header"),
        ];
        for (bytes, why) in cases {
            assert_eq!(OpusStream::read(bytes).err(), Some(why));
        }
    }
}
