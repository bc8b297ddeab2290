//! The persona's typing notice while a turn works: on, renewed every 20 s, and cleared when
//! the turn ends.

use std::time::Duration;

use ruma::{OwnedRoomId, OwnedUserId, RoomId, UserId};

use crate::matrix;

/// A typing notice that is on; `stop` clears it.
#[derive(Debug)]
pub struct Typing {
    renew: tokio::task::JoinHandle<()>,
    matrix: matrix::Client,
    room: OwnedRoomId,
    persona: OwnedUserId,
}

impl Typing {
    pub async fn stop(self) {
        self.renew.abort();
        if let Err(e) = self.matrix.typing(&self.room, &self.persona, false, 0).await {
            tracing::debug!(error = %e, "clearing the typing notice failed");
        }
    }
}

impl Typing {
    /// Turns the notice on until [`Typing::stop`].
    pub(super) fn start(matrix: matrix::Client, room: &RoomId, persona: &UserId) -> Self {
        let (room, persona): (OwnedRoomId, OwnedUserId) = (room.to_owned(), persona.to_owned());
        let renew = {
            let (matrix, room, persona) = (matrix.clone(), room.clone(), persona.clone());
            tokio::spawn(async move {
                loop {
                    if let Err(e) = matrix.typing(&room, &persona, true, 30_000).await {
                        tracing::debug!(error = %e, "typing notice failed");
                    }
                    tokio::time::sleep(Duration::from_secs(20)).await;
                }
            })
        };
        Typing { renew, matrix, room, persona }
    }
}
