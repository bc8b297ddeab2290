//! The personas' end-to-end encryption state, one file per role: the crypto machine's
//! own state, written under a lease (`state.rs`), and the secrets in it sealed at rest
//! (`pickles.rs`); what it looks up (`lookup.rs`); the door's crypto inbox
//! (`inbox.rs`) and the events waiting for a room key (`flow.rs`); what a room's
//! encryption is and when its key rotates (`rooms.rs`); and replayed encrypted
//! transactions (`replay.rs`). The crypto module above the store is their one user.

mod flow;
mod inbox;
mod lookup;
mod pickles;
mod replay;
mod rooms;
mod state;

pub use flow::WAITING_FOR_KEY;
pub use inbox::InboxRow;
pub use rooms::{RoomEncryption, Rotation};
pub use state::{CryptoWrite, Fence, GroupSessionRow, OlmSessionRow};
