//! The sandbox: which room a tool call may write in. It is the asker's, whatever the model
//! names: this chat (`room` left out), the asker's DM with the persona (`"dm"`, found or
//! opened), or another room only where both the asker and the persona are joined. Reply
//! and thread targets must be events of the room written in.
//!
//! What the model is told of other rooms is bounded too: in a DM, at most
//! [`MAX_CHOICES`] shared rooms, each name cut to [`MAX_NAME_CHARS`] characters and quoted
//! as data; in a group room none, so a group never learns the asker's other rooms.

use ruma::{EventId, OwnedRoomId, RoomId, UserId};

use crate::blocks::cut;
use crate::outbox::Outbox;
use crate::store::{self, Store};
use crate::tools::{RoomChoices, RoomTarget, ToolError, ToolErrorCode};
use crate::turn::Scope;

/// Shared rooms offered for the `room` argument at most.
pub const MAX_CHOICES: usize = 10;
/// Characters of a room name shown at most.
pub const MAX_NAME_CHARS: usize = 80;

/// The other rooms the asker may name (none from a group room).
pub async fn choices(store: &Store, scope: &Scope) -> Result<RoomChoices, store::Error> {
    let mut choices = RoomChoices { in_dm: scope.is_dm, shared: Vec::new() };
    if !scope.is_dm {
        return Ok(choices);
    }
    for room in store.shared_rooms(&scope.persona, &scope.asker).await? {
        if room == scope.room {
            continue;
        }
        if choices.shared.len() == MAX_CHOICES {
            break;
        }
        let name = store.room_name(&room).await?.unwrap_or_else(|| "unnamed room".to_owned());
        choices.shared.push((room, cut(&name, MAX_NAME_CHARS)));
    }
    Ok(choices)
}

/// Whether `user` is joined to `room`, as far as richbot knows.
pub async fn joined(store: &Store, room: &RoomId, user: &UserId) -> Result<bool, ToolError> {
    Ok(store.joined_members(room).await.map_err(internal)?.iter().any(|u| u == user))
}

/// Refuses (`invalid_arguments` at `path`) an event that is not one of `room`'s.
pub async fn event_in_room(store: &Store, event: &EventId, room: &RoomId, path: &str) -> Result<(), ToolError> {
    let seen = store.event(event).await.map_err(internal)?.map(|e| e.room_id);
    let ours = match seen {
        Some(r) => Some(r),
        None => store.sent_message(event).await.map_err(internal)?.map(|m| m.room_id),
    };
    if ours.as_deref() == Some(room) {
        return Ok(());
    }
    Err(ToolError::at(
        ToolErrorCode::InvalidArguments,
        path,
        format!("{} is not an event of the room you are writing in", cut(event.as_str(), 80)),
    ))
}

/// The room `target` names, if the turn's asker may have the persona write there.
pub async fn resolve(
    store: &Store,
    outbox: &Outbox,
    scope: &Scope,
    target: &RoomTarget,
) -> Result<OwnedRoomId, ToolError> {
    match target {
        RoomTarget::Here => Ok(scope.room.clone()),
        RoomTarget::Dm if scope.is_dm => Ok(scope.room.clone()),
        RoomTarget::Dm => dm(outbox, scope).await,
        // The note's own words for a chat ("a direct chat with @alice:x"), the asker's id, or
        // "here": small models copy them into `room`.
        RoomTarget::Named(name) if says_here(name) => Ok(scope.room.clone()),
        RoomTarget::Named(name) if says_dm(name, &scope.asker) => {
            if scope.is_dm {
                Ok(scope.room.clone())
            } else {
                dm(outbox, scope).await
            }
        }
        RoomTarget::Named(name) => {
            let refuse = || {
                ToolError::at(
                    ToolErrorCode::RoomNotAllowed,
                    "room",
                    format!(
                        "you may post only here, in \"dm\", or in a room id where both you and {} are members (got \"{}\")",
                        scope.asker,
                        cut(name, 60)
                    ),
                )
            };
            let room = RoomId::parse(name.as_str()).map_err(|_| refuse())?;
            if both_joined(store, &room, &scope.asker, &scope.persona).await? { Ok(room) } else { Err(refuse()) }
        }
    }
}

/// `room` names the chat the turn is in.
fn says_here(room: &str) -> bool {
    matches!(room.trim().to_lowercase().as_str(), "here" | "this chat" | "this room" | "current" | "this")
}

/// `room` names the asker's direct chat as the note does, or by the asker's id.
fn says_dm(room: &str, asker: &UserId) -> bool {
    let room = room.trim();
    let asker = asker.as_str();
    room == asker || room.strip_prefix("a direct chat with ").is_some_and(|who| who.trim() == asker)
}

/// The asker's DM with the persona: the known one if both are still in it, else a new one.
async fn dm(outbox: &Outbox, scope: &Scope) -> Result<OwnedRoomId, ToolError> {
    outbox.dm(&scope.persona, &scope.asker).await.map_err(|e| {
        let code = match e {
            crate::outbox::Error::Refused(_) => ToolErrorCode::SendFailed,
            crate::outbox::Error::Unavailable(_) => ToolErrorCode::HomeserverUnavailable,
            _ => return internal(e),
        };
        ToolError::new(code, format!("could not open a direct chat with {}: {e}", scope.asker))
    })
}

async fn both_joined(store: &Store, room: &RoomId, a: &UserId, b: &UserId) -> Result<bool, ToolError> {
    let joined = store.joined_members(room).await.map_err(internal)?;
    Ok(joined.iter().any(|u| u == a) && joined.iter().any(|u| u == b))
}

/// An error inside richbot: logged in full, told to the model without internals.
pub(in crate::turn) fn internal(e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, "tool call failed inside richbot");
    ToolError::new(ToolErrorCode::Internal, "richbot could not complete the call because of an internal error")
}

#[cfg(test)]
mod tests {
    use super::{says_dm, says_here};

    #[test]
    fn the_notes_words_for_a_chat_name_it_and_nothing_else_does() {
        let alice = ruma::user_id!("@alice:x");
        assert!(says_dm("a direct chat with @alice:x", alice));
        assert!(says_dm(" @alice:x ", alice));
        assert!(!says_dm("a direct chat with @mallory:x", alice), "someone else's");
        assert!(!says_dm("!team:x", alice));
        assert!(says_here("This chat") && says_here("here"));
        assert!(!says_here("!team:x") && !says_here("team"));
    }
}
