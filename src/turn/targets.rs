//! The sandbox: which room a tool call may write in. It is the asker's, whatever the model
//! names: this chat (`room` left out), the asker's DM with the persona (`"dm"`, found or
//! opened), or another room only where both the asker and the persona are joined.

use ruma::{OwnedRoomId, RoomId, UserId};

use super::Scope;
use crate::blocks::cut;
use crate::outbox::Outbox;
use crate::store::Store;
use crate::tools::{RoomTarget, ToolError, ToolErrorCode};

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
        RoomTarget::Dm => dm(store, outbox, scope).await,
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

/// The asker's DM with the persona: the known one if both are still in it, else a new one.
async fn dm(store: &Store, outbox: &Outbox, scope: &Scope) -> Result<OwnedRoomId, ToolError> {
    if let Some(room) = store.dm_room(&scope.persona, &scope.asker).await.map_err(internal)?
        && both_joined(store, &room, &scope.asker, &scope.persona).await?
    {
        return Ok(room);
    }
    let room = outbox.create_dm(&scope.persona, &scope.asker).await.map_err(|e| {
        let code = match e {
            crate::matrix::Error::Refused { .. } => ToolErrorCode::SendFailed,
            crate::matrix::Error::Unavailable(_) => ToolErrorCode::HomeserverUnavailable,
        };
        ToolError::new(code, format!("could not open a direct chat with {}: {e}", scope.asker))
    })?;
    store.set_dm_room(&scope.persona, &scope.asker, &room).await.map_err(internal)?;
    store.set_membership(&room, &scope.persona, "join").await.map_err(internal)?;
    Ok(room)
}

async fn both_joined(store: &Store, room: &RoomId, a: &UserId, b: &UserId) -> Result<bool, ToolError> {
    let joined = store.joined_members(room).await.map_err(internal)?;
    Ok(joined.iter().any(|u| u == a) && joined.iter().any(|u| u == b))
}

/// An error inside richbot: logged in full, told to the model without internals.
pub(super) fn internal(e: impl std::fmt::Display) -> ToolError {
    tracing::error!(error = %e, "tool call failed inside richbot");
    ToolError::new(ToolErrorCode::Internal, "richbot could not complete the call because of an internal error")
}
