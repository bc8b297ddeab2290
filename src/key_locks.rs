//! One async lock per key, kept only while someone holds or awaits it: calls about the
//! same thing (edits of one message, an agent client's calls with one idempotency key)
//! run one after another, in the order they asked, while calls about different things
//! run side by side. The map never grows past the keys in use.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

/// The locks, by key.
#[derive(Debug)]
pub struct Locks<K>(Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>);

impl<K> Default for Locks<K> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

/// A hold on one key; dropping it lets the next caller with that key in.
pub struct Held<'a, K: Hash + Eq> {
    locks: &'a Locks<K>,
    key: K,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl<K: Hash + Eq + Clone> Locks<K> {
    /// Waits for the holders of `key` before this one to let go.
    pub async fn hold(&self, key: K) -> Held<'_, K> {
        let lock = {
            let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            map.entry(key.clone()).or_default().clone()
        };
        Held { locks: self, key, guard: Some(lock.lock_owned().await) }
    }

    /// How many keys are held or awaited now.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no key is held or awaited.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Hash + Eq> Drop for Held<'_, K> {
    fn drop(&mut self) {
        let mut map = self.locks.0.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.guard.take());
        // Only the map holds it now (clones are taken under the map's lock): nobody waits.
        if map.get(&self.key).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_key_at_a_time_other_keys_alongside_and_nothing_kept_after() {
        let locks = Locks::default();
        let a = locks.hold("a").await;
        let _b = locks.hold("b").await;
        let waiting = locks.hold("a");
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending(), "a second holder of a waits");
        drop(a);
        let again = waiting.await;
        assert_eq!(locks.len(), 2);
        drop(again);
        assert_eq!(locks.len(), 1, "a key nobody holds is forgotten");
    }
}
