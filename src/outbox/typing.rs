//! The persona's typing notice while a turn works: on once the turn has taken
//! [`SHOWN_AFTER`], renewed every 20 s, and cleared when the turn ends. An answer that
//! comes sooner shows none: a notice that flashed on and off would tell the person
//! nothing, and its two homeserver calls (and the typing updates every member's client
//! and every appservice in the room then receive) would be on the answer's way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};

use crate::matrix;

/// How long a turn works before its typing notice comes on.
pub const SHOWN_AFTER: Duration = Duration::from_secs(1);

/// A typing notice, on or due; `stop` clears it (if it came on).
#[derive(Debug)]
pub struct Typing {
    renew: tokio::task::JoinHandle<()>,
    /// Whether the notice was asked for (so there is one to clear).
    shown: Arc<AtomicBool>,
    matrix: matrix::Client,
    room: OwnedRoomId,
    persona: OwnedUserId,
}

impl Typing {
    pub async fn stop(self) {
        self.renew.abort();
        if !self.shown.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = self.matrix.typing(&self.room, &self.persona, false, 0).await {
            tracing::debug!(error = %e, "clearing the typing notice failed");
        }
    }
}

impl Typing {
    /// Turns the notice on after [`SHOWN_AFTER`], until [`Typing::stop`].
    pub(super) fn start(matrix: matrix::Client, room: &RoomId, persona: &UserId) -> Self {
        let (room, persona): (OwnedRoomId, OwnedUserId) = (room.to_owned(), persona.to_owned());
        let shown = Arc::new(AtomicBool::new(false));
        let renew = {
            let (matrix, room, persona, shown) = (matrix.clone(), room.clone(), persona.clone(), shown.clone());
            tokio::spawn(async move {
                tokio::time::sleep(SHOWN_AFTER).await;
                loop {
                    shown.store(true, Ordering::Release);
                    if let Err(e) = matrix.typing(&room, &persona, true, 30_000).await {
                        tracing::debug!(error = %e, "typing notice failed");
                    }
                    tokio::time::sleep(Duration::from_secs(20)).await;
                }
            })
        };
        Typing { renew, shown, matrix, room, persona }
    }
}
