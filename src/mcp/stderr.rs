//! An MCP server's stderr, into richbot's log, bounded: a line is cut, never buffered
//! whole, and lines are rate-limited per server, with a count of those dropped.

use std::time::Instant;

use tokio::io::AsyncBufReadExt;

/// Longest stderr line logged; the rest of it is cut.
const STDERR_LINE: usize = 1024;
/// Stderr lines logged per server: a burst of this many, then one a second.
const STDERR_BURST: u32 = 50;

/// The server's stderr, line by line, into richbot's log: each line cut to
/// [`STDERR_LINE`] bytes (never buffered whole: a line without end costs nothing), and at
/// most [`STDERR_BURST`] at once then one a second, with a count of the lines dropped
/// meanwhile (a chatty or hostile server cannot flood the log).
pub(super) async fn forward(server: String, stderr: tokio::process::ChildStderr) {
    let mut reader = tokio::io::BufReader::new(stderr);
    let (mut tokens, mut refilled, mut dropped) = (STDERR_BURST, Instant::now(), 0u64);
    while let Some((line, cut)) = bounded_line(&mut reader, STDERR_LINE).await {
        let gained = u32::try_from(refilled.elapsed().as_secs()).unwrap_or(u32::MAX);
        if gained > 0 {
            tokens = tokens.saturating_add(gained).min(STDERR_BURST);
            refilled = Instant::now();
        }
        if tokens == 0 {
            dropped += 1;
            continue;
        }
        tokens -= 1;
        if dropped > 0 {
            tracing::warn!(server = %server, dropped, "MCP server stderr lines dropped (too many)");
            dropped = 0;
        }
        let cut = if cut { " [cut]" } else { "" };
        tracing::info!(server = %server, "{line}{cut}");
    }
}

/// The next line of `reader` without its newline, its first `max` bytes kept (and
/// whether more were thrown away); `None` at the end.
async fn bounded_line<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R, max: usize) -> Option<(String, bool)> {
    let (mut kept, mut cut, mut any) = (Vec::new(), false, false);
    loop {
        let buf = reader.fill_buf().await.ok()?;
        if buf.is_empty() {
            return any.then(|| (String::from_utf8_lossy(&kept).into_owned(), cut));
        }
        any = true;
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        let room = max.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..take.min(room)]);
        cut |= take > room;
        reader.consume(take + usize::from(done));
        if done {
            return Some((String::from_utf8_lossy(&kept).into_owned(), cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_lines_are_cut_without_being_read_whole() {
        let long = "x".repeat(10_000);
        let text = format!("short\n{long}\nlast");
        let mut reader = tokio::io::BufReader::with_capacity(64, text.as_bytes());
        assert_eq!(bounded_line(&mut reader, 1024).await, Some(("short".to_owned(), false)));
        let (cut, was_cut) = bounded_line(&mut reader, 1024).await.expect("a line");
        assert_eq!((cut.len(), was_cut), (1024, true));
        assert_eq!(bounded_line(&mut reader, 1024).await, Some(("last".to_owned(), false)));
        assert_eq!(bounded_line(&mut reader, 1024).await, None);
    }
}
