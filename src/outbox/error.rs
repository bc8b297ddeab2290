//! How a write fails, as the turn's tool results tell it apart: the homeserver's for good
//! or for now, an encrypted room richbot cannot encrypt for, not this persona's message,
//! a replay that differs, or the store's.

use crate::store;

/// A write that did not land.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The homeserver refused it for good (recorded in the outbox with the reason).
    #[error("the homeserver refused the message: {0}")]
    Refused(String),
    /// The homeserver stayed unreachable through the retries.
    #[error("{0}")]
    Unavailable(String),
    /// The room is encrypted and richbot cannot encrypt now (encryption off, or the
    /// homeserver found lacking): never sent in the clear instead.
    #[error(
        "{0} is an encrypted room and richbot cannot encrypt right now (encryption is off, or the homeserver does not support it), so nothing is sent there in the clear"
    )]
    Unencrypted(String),
    /// Not a message this persona sent.
    #[error("not a message this persona sent")]
    NotOwner,
    /// A write claimed before under this id had another room, kind or content.
    #[error("write {0} was first made with another content; it is not sent under its old id")]
    Mismatch(String),
    #[error("store: {0}")]
    Store(#[from] store::Error),
}
