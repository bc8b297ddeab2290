//! A persona's crypto state in richbot's own database: the crypto library's `CryptoStore`
//! over the `crypto_*` tables (SQLite or PostgreSQL, backed up with the rest, shared by
//! every instance). Pickles are JSON; `save.rs` writes them, `load.rs` reads them back.
//!
//! Each save the library makes is one database transaction (`Store::crypto_write`), so
//! what it hands over together lands together. The library's own cross-process lock is
//! kept in memory: richbot uses a persona's machine only under its crypto lease
//! (`crypto::lease`), which is what keeps two instances apart; within one process the
//! library's lock then behaves as its in-memory store's does.

mod load;
mod save;
mod store;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use matrix_sdk_common::cross_process_lock::memory_store_helper::Lease;
use matrix_sdk_crypto::olm::StaticAccountData;
use matrix_sdk_crypto::store::CryptoStoreError;

use crate::store::{CryptoWrite, Store};
pub use save::key;

/// A failure of the crypto state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Store(#[from] crate::store::Error),
    #[error("stored crypto state is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("stored crypto state could not be unpickled: {0}")]
    Unpickle(String),
    #[error("the persona's Olm account is not loaded yet")]
    AccountUnset,
}

impl From<Error> for CryptoStoreError {
    fn from(e: Error) -> Self {
        CryptoStoreError::backend(e)
    }
}

type Result<T, E = Error> = std::result::Result<T, E>;

/// One persona's crypto state.
#[derive(Clone)]
pub struct DbState {
    store: Store,
    persona: String,
    static_account: Arc<RwLock<Option<StaticAccountData>>>,
    leases: Arc<Mutex<HashMap<String, Lease>>>,
    /// Among instances, the crypto lease every save is checked against.
    fence: Option<crate::store::Fence>,
}

impl std::fmt::Debug for DbState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbState").field("persona", &self.persona).finish_non_exhaustive()
    }
}

impl DbState {
    pub fn new(store: Store, persona: &str) -> Self {
        Self { store, persona: persona.to_owned(), static_account: Arc::default(), leases: Arc::default(), fence: None }
    }

    /// Every save checked against `fence` (the lease the machine was loaded under), in
    /// the save's own transaction.
    pub fn fenced(self, fence: Option<crate::store::Fence>) -> Self {
        Self { fence, ..self }
    }

    fn static_data(&self) -> Result<StaticAccountData> {
        self.static_account.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone().ok_or(Error::AccountUnset)
    }

    async fn write(&self, w: CryptoWrite) -> Result<()> {
        let w = CryptoWrite { fence: self.fence.clone(), ..w };
        Ok(self.store.crypto_write(&self.persona, &w).await?)
    }
}
