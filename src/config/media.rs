//! `[media]`: what members' pictures and files may cost a turn. The key names are a
//! contract; the bounds are checked at start.

use serde::Deserialize;

use crate::media::Limits;

/// `[media]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaConfig {
    /// Longest side of a picture the model gets, in pixels (scaled down to it).
    #[serde(default = "default_px")]
    pub max_image_px: u32,
    /// Bytes of a picture the model gets, after scaling.
    #[serde(default = "default_image_bytes")]
    pub max_image_bytes: usize,
    /// Pictures a turn sends the model at most (the newest; older ones are named).
    #[serde(default = "default_images")]
    pub images_per_turn: usize,
    /// Bytes of a text file the model is given at most (larger ones are named).
    #[serde(default = "default_file_bytes")]
    pub max_file_bytes: usize,
    /// Bytes of one picture or file the persona uploads at most (an MCP tool's image, a
    /// payload's `data:` URL).
    #[serde(default = "default_upload_bytes")]
    pub max_upload_bytes: usize,
    /// Uploads a turn makes at most.
    #[serde(default = "default_uploads")]
    pub uploads_per_turn: usize,
}

impl Default for MediaConfig {
    fn default() -> Self {
        Self {
            max_image_px: default_px(),
            max_image_bytes: default_image_bytes(),
            images_per_turn: default_images(),
            max_file_bytes: default_file_bytes(),
            max_upload_bytes: default_upload_bytes(),
            uploads_per_turn: default_uploads(),
        }
    }
}

fn default_px() -> u32 {
    1568
}
fn default_image_bytes() -> usize {
    4 * 1024 * 1024
}
fn default_images() -> usize {
    4
}
fn default_file_bytes() -> usize {
    256 * 1024
}
fn default_upload_bytes() -> usize {
    8 * 1024 * 1024
}
fn default_uploads() -> usize {
    8
}

impl MediaConfig {
    /// The bounds as the media fetcher takes them.
    pub fn limits(&self) -> Limits {
        Limits {
            max_image_px: self.max_image_px,
            max_image_bytes: self.max_image_bytes,
            images_per_turn: self.images_per_turn,
            max_file_bytes: self.max_file_bytes,
            max_upload_bytes: self.max_upload_bytes,
            uploads_per_turn: self.uploads_per_turn,
        }
    }

    /// One line per bound out of range, naming its key.
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        if !(64..=8192).contains(&self.max_image_px) {
            problems.push("media.max_image_px: must be 64-8192".to_owned());
        }
        if !(16 * 1024..=20 * 1024 * 1024).contains(&self.max_image_bytes) {
            problems.push("media.max_image_bytes: must be 16384-20971520".to_owned());
        }
        if self.images_per_turn > 16 {
            problems.push("media.images_per_turn: must be 0-16".to_owned());
        }
        if self.max_file_bytes > 4 * 1024 * 1024 {
            problems.push("media.max_file_bytes: must be at most 4194304".to_owned());
        }
        if !(1024..=50 * 1024 * 1024).contains(&self.max_upload_bytes) {
            problems.push("media.max_upload_bytes: must be 1024-52428800".to_owned());
        }
        if self.uploads_per_turn > 32 {
            problems.push("media.uploads_per_turn: must be 0-32".to_owned());
        }
    }
}
