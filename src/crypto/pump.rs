//! The background part of the personas' crypto: takes their crypto inboxes as things
//! arrive (the inbox's door wakes it; among instances it also looks every second, for
//! inboxes another instance's door filled), and ends the waits of encrypted events whose
//! key did not come in time: they go back to their rooms, whose step gives them up and
//! tells the room once. A failure (the homeserver down) is tried again two seconds on;
//! the inbox rows stay until taken.

use std::time::Duration;

use futures::FutureExt;
use ruma::UserId;

use super::Crypto;
use crate::clock::now_ms;

/// Longest sleep when nothing wakes the pump (one instance); among instances, one second.
const IDLE: Duration = Duration::from_secs(30);
const SHARED: Duration = Duration::from_secs(1);
const RETRY: Duration = Duration::from_secs(2);

pub async fn run(crypto: Crypto) {
    let i = crypto.inner.clone();
    let mut last_error = String::new();
    loop {
        let mut next = if i.sharing.is_some() { SHARED } else { IDLE };
        let mut failed = None;
        match i.store.crypto_inbox_personas().await {
            Ok(personas) => {
                for persona in personas.iter().filter_map(|p| UserId::parse(p).ok()) {
                    match crypto.settle(&persona).boxed().await {
                        Ok(()) => {}
                        // Its device is being set up (at start): taken once it is.
                        Err(super::Error::NotReady(_)) => next = next.min(RETRY),
                        Err(e) => failed = Some(format!("{persona}: {e}")),
                    }
                }
            }
            Err(e) => failed = Some(e.to_string()),
        }
        match i.store.expire_key_waits(now_ms()).await {
            Ok(rooms) if !rooms.is_empty() => {
                if let Some(queue) = &i.queue {
                    queue.push(rooms);
                }
            }
            Ok(_) => {}
            Err(e) => failed = Some(e.to_string()),
        }
        if let Ok(Some(until)) = i.store.next_key_wait_end().await {
            let ms = u64::try_from(until - now_ms()).unwrap_or(0);
            next = next.min(Duration::from_millis(ms));
        }
        match failed {
            Some(e) => {
                // Said once per distinct failure, not every retry.
                if e != last_error {
                    tracing::warn!(error = %e, "could not hand the personas' crypto what arrived; retrying");
                    last_error = e;
                }
                next = next.min(RETRY);
            }
            None => last_error.clear(),
        }
        tokio::select! {
            () = i.wake.notified() => {}
            () = tokio::time::sleep(next) => {}
        }
    }
}
