//! A `rich_send` / `rich_edit` call as planned for its write: the checked call, whether
//! its room is encrypted, and its charts drawn and uploaded (`uploads`, `pictures`); the
//! runner writes it (`runner`), the companions follow it (`attachments`).

use crate::chart::SHOWN;
use crate::media::Uploaded;
use crate::render::Inline;
use crate::tools::RichCall;

/// A `rich_send` / `rich_edit` call, planned, with what it shows beyond text.
pub(in crate::turn) struct Planned {
    pub call: RichCall,
    /// Whether the room it writes to is encrypted (its uploads are).
    pub encrypted: bool,
    /// Its charts, drawn and uploaded.
    pub drawn: Vec<Drawn>,
}

/// A chart block's drawing, uploaded.
#[derive(Debug, Clone)]
pub(in crate::turn) struct Drawn {
    /// The block's place in the payload.
    pub block: usize,
    pub uploaded: Uploaded,
    /// The data in words.
    pub alt: String,
    pub bytes: usize,
    /// The PNG's size in pixels (drawn at twice the size it is shown at).
    pub size: (u32, u32),
}

impl Drawn {
    /// The drawing as a message shows it inline.
    pub fn inline(&self) -> Inline {
        let (width, height) = SHOWN;
        Inline { block: self.block, src: self.uploaded.mxc.clone(), alt: self.alt.clone(), width, height }
    }
}
