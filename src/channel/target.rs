//! Where a client's message goes, and whether it may: `channel` posts only in a room the
//! client's `rooms` allow and the persona is joined to; `direct` only to a user its
//! `users` allow, in the persona's DM with them (opened the first time, reused after).

use ruma::{EventId, OwnedRoomId, RoomAliasId, RoomId, UserId};

use super::{Channel, Client, Failure};

impl Channel {
    /// The room `to` names for `client` (`direct`: the DM with that user), if the call is
    /// allowed; it takes one of the client's writes first.
    pub(super) async fn room_for(&self, client: &Client, direct: bool, to: &str) -> Result<OwnedRoomId, Failure> {
        let to = to.trim();
        // Before any lookup: a client past its pace costs the homeserver nothing.
        self.paced(client)?;
        if direct {
            let user = UserId::parse(to).map_err(|_| {
                Failure::invalid(
                    "to",
                    format!(
                        "to must be a user id like @alice:example.org for a direct message (got \"{}\")",
                        crate::blocks::cut(to, 80)
                    ),
                )
            })?;
            if !client.may_message(user.as_str()) {
                return Err(Failure::new(
                    403,
                    "user_not_allowed",
                    format!(
                        "client {} may not message {user} directly; the admin can add them to its users",
                        client.name
                    ),
                )
                .at("to"));
            }
            return self.dm(client, &user).await;
        }
        let room = self.channel_room(to).await?;
        if !self.may_post(client, to, &room).await? {
            return Err(Failure::new(
                403,
                "room_not_allowed",
                format!("client {} may not post in {to}; the admin can add it to its rooms", client.name),
            )
            .at("to"));
        }
        let joined = self.store.joined_members(&room).await.map_err(Failure::internal)?;
        if !joined.contains(&client.persona) {
            return Err(
                Failure::new(409, "not_joined", format!("invite {} to the room first", client.persona)).at("to")
            );
        }
        Ok(room)
    }

    /// Whether `client` may post in `room` (named `to` by the caller): a pattern matches
    /// the name or the id, or an alias in `rooms` names that room now.
    async fn may_post(&self, client: &Client, to: &str, room: &RoomId) -> Result<bool, Failure> {
        if client.may_post(to, room.as_str()) {
            return Ok(true);
        }
        for (pattern, _) in &client.rooms {
            let Ok(alias) = RoomAliasId::parse(pattern.as_str()) else { continue };
            match self.matrix.resolve_alias(&alias).await {
                Ok(Some(r)) if r == room => return Ok(true),
                Ok(_) => {}
                Err(crate::matrix::Error::Unavailable(e)) => return Err(Failure::unavailable(e)),
                Err(e) => {
                    tracing::warn!(client = client.name, %alias, error = %e, "could not resolve an alias of agents.clients.rooms")
                }
            }
        }
        Ok(false)
    }

    /// Refuses a write or a read in `room` (where `client` wrote before) that its
    /// `rooms` no longer allow, unless `room` is the persona's DM with a user its
    /// `users` allow: an admin's narrowing of a client holds for what it sent before.
    pub(super) async fn still_allowed(&self, client: &Client, room: &RoomId) -> Result<(), Failure> {
        if self.may_post(client, room.as_str(), room).await? {
            return Ok(());
        }
        let partners = self.store.dm_partners(&client.persona, room).await.map_err(Failure::internal)?;
        if partners.iter().any(|user| client.may_message(user.as_str())) {
            return Ok(());
        }
        Err(Failure::new(403, "room_not_allowed", format!("client {} may no longer use {room}", client.name)))
    }

    /// A room id, or the room an alias names.
    async fn channel_room(&self, to: &str) -> Result<OwnedRoomId, Failure> {
        if let Ok(room) = RoomId::parse(to) {
            return Ok(room);
        }
        let alias = RoomAliasId::parse(to).map_err(|_| {
            Failure::invalid(
                "to",
                format!("to must be a room id (!...) or alias (#...) for a channel, or a user id for a direct message (got \"{}\")", crate::blocks::cut(to, 80)),
            )
        })?;
        match self.matrix.resolve_alias(&alias).await {
            Ok(Some(room)) => Ok(room),
            Ok(None) => {
                Err(Failure::new(404, "unknown_room", format!("no room has the alias {alias}; check its spelling"))
                    .at("to"))
            }
            Err(crate::matrix::Error::Unavailable(e)) => Err(Failure::unavailable(e)),
            Err(e) => {
                Err(Failure::new(404, "unknown_room", format!("the homeserver could not resolve {alias}: {e}"))
                    .at("to"))
            }
        }
    }

    /// The persona's DM with `user`: the known one while the persona is in it and the
    /// user is in it or invited, else a new one (`is_direct`, encrypted when encryption
    /// is on).
    async fn dm(&self, client: &Client, user: &UserId) -> Result<OwnedRoomId, Failure> {
        self.outbox.dm(&client.persona, user).await.map_err(|e| match e {
            crate::outbox::Error::Unavailable(e) => Failure::unavailable(e),
            crate::outbox::Error::Refused(e) => Failure::new(
                502,
                "send_failed",
                format!("the homeserver refused to open a direct chat with {user}: {e}"),
            ),
            e => Failure::internal(e),
        })
    }

    /// Refuses an event (`reply_to`, `thread`) that is not one of `room`'s.
    pub(super) async fn event_in(&self, event: &EventId, room: &RoomId, path: &str) -> Result<(), Failure> {
        let seen = self.store.event(event).await.map_err(Failure::internal)?.map(|e| e.room_id);
        if seen.as_deref() == Some(room) {
            return Ok(());
        }
        Err(Failure::invalid(path, format!("{event} is not an event of the room you are posting in")))
    }
}
