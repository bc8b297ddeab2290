//! Where a turn happens and for whom ([`Scope`]), settled from the turn's record and its
//! events before anything else runs.

use ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};

use crate::store::Store;
use crate::store::{self, StoredEvent, TurnRow};

/// Where a turn happens and for whom: what every part of the turn is scoped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub room: OwnedRoomId,
    pub persona: OwnedUserId,
    pub asker: OwnedUserId,
    /// The room has exactly the persona and one other member.
    pub is_dm: bool,
    /// The thread the turn answers in: new messages go there unless the model says otherwise.
    pub thread: Option<OwnedEventId>,
    /// The question the turn's text answers reply to (a group room's `reply` mode).
    pub reply_to: Option<OwnedEventId>,
}

/// Who talks to whom, and where: the room, the persona that answers and the member who
/// asked. What a notice, a command or a refusal needs of a scope, named so that the
/// persona and the asker cannot be swapped unseen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parties<'a> {
    pub room: &'a RoomId,
    pub persona: &'a UserId,
    pub asker: &'a UserId,
}

impl Scope {
    /// The room, persona and asker of the turn.
    pub fn parties(&self) -> Parties<'_> {
        Parties { room: &self.room, persona: &self.persona, asker: &self.asker }
    }

    /// How the turn's text answers relate to the conversation.
    pub fn relation(&self) -> crate::render::Relation<'_> {
        crate::render::Relation { reply_to: self.reply_to.as_deref(), thread: self.thread.as_deref() }
    }
}

/// Where the turn answers: in the question's thread if it is in one; else, in a group
/// room, as the room's `!mode` says (a reply by default, a new thread, or plainly).
pub(super) async fn settle(store: &Store, turn: &TurnRow, events: &[StoredEvent]) -> Result<Scope, store::Error> {
    let is_dm = store.joined_members(&turn.room_id).await?.len() == 2;
    let question = events.iter().rev().find(|e| e.event_type == "m.room.message");
    let mut thread = events.last().and_then(StoredEvent::relation).and_then(|r| r.thread_root().map(ToOwned::to_owned));
    let mut reply_to = None;
    if let (false, None, Some(q)) = (is_dm, &thread, question) {
        match store.room_mode(&turn.room_id).await?.as_deref() {
            Some("thread") => thread = Some(q.event_id.clone()),
            Some("flat") => {}
            _ => reply_to = Some(q.event_id.clone()),
        }
    }
    Ok(Scope {
        room: turn.room_id.clone(),
        persona: turn.persona.clone(),
        asker: turn.asker.clone(),
        is_dm,
        thread,
        reply_to,
    })
}
