//! What a turn posts or reads besides text, one file per kind: charts drawn into
//! pictures and uploads (a rich message's `data:` images and files) made `mxc://` URLs
//! before the message is rendered, the companions posted after it (pictures and files an
//! encrypted room cannot inline), and voice in (transcribed) and out (spoken).
//!
//! Where each feature's other pieces are:
//! - **Pictures and uploads** ([`planned`], [`uploads`], [`pictures`], [`attachments`]):
//!   charts drawn by `chart`; uploading, fetching and scaling in `media`;
//!   inline pictures in `render::blocks::pictures` and companions in
//!   `render::attachments`; `[media]` in `config::media`; the rows that keep
//!   an upload once in `store::uploads`.
//! - **Voice** ([`voice_in`], [`voice_out`]): lengths read from the audio itself and the
//!   speech endpoints in `speech`; `[transcription]` and `[speech]` in
//!   `config::speech`; the words kept in `store::transcripts`; the
//!   endpoints checked at start-up in `check::speech`.

pub(super) mod attachments;
pub mod pictures;
pub(super) mod planned;
pub(super) mod uploads;
pub(super) mod voice_in;
pub(super) mod voice_out;
