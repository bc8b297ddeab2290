//! Media types as a header may carry them. A member's `info.mimetype`, a model's `data:`
//! URL and an MCP tool's image type all end up in a `Content-Type` (an upload to the
//! homeserver, a multipart part sent to the transcription endpoint): a string with a
//! line break there would add header lines of the sender's choosing. One rule, here:
//! `type/subtype` of token characters (RFC 9110 §5.6.2, less a few that never appear in
//! a media type), else `application/octet-stream`.

/// What a header carries when a media type is not one.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// Whether `m` is a bare `type/subtype` of token characters.
pub fn valid(m: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty() && s.len() <= 100 && s.chars().all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
    };
    m.split_once('/').is_some_and(|(t, s)| token(t) && token(s))
}

/// `m` if it is a media type, else [`OCTET_STREAM`].
pub fn or_octet_stream(m: &str) -> &str {
    if valid(m) { m } else { OCTET_STREAM }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_type_and_subtype_reach_a_header() {
        for ok in ["audio/ogg", "image/svg+xml", "application/vnd.ms-excel"] {
            assert_eq!(or_octet_stream(ok), ok);
        }
        for bad in [
            "audio/ogg\r\nX-Evil: 1",
            "audio/ogg; codecs=opus",
            "png",
            "audio/",
            "/ogg",
            "audio/ogg\n",
            "text/plain\u{0}",
            "a/b/c",
            "",
        ] {
            assert_eq!(or_octet_stream(bad), OCTET_STREAM, "{bad:?}");
        }
    }
}
