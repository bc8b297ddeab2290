//! A client's send or edit, exactly once: the ledger row first (or the one an earlier
//! call with the same key made), then the checks, then the row's outbox write.
//!
//! A repeat of a finished call returns its receipt (`deduplicated: true`) and posts
//! nothing; a repeat of one a crash or an outage cut off resumes its write under the
//! same transaction id (the outbox finds it by its marker if it landed); the same key for
//! another request is `idempotency_conflict`. A fresh call that is refused (not allowed,
//! rate limited) leaves no row behind, so fixing it and calling again with the same key
//! works. The work runs in its own task: a caller that hangs up does not cut a write in
//! half.

use std::sync::Arc;
use std::time::Instant;

use ruma::{EventId, OwnedEventId, RoomId};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Channel, Client, Content, EditRequest, Failure, Receipt, SendRequest};
use crate::clock::now_ms;
use crate::outbox::{self, Write, WriteId};
use crate::render::{self, Relation};
use crate::store::AgentRequest;

/// Most bytes in an idempotency key.
const MAX_KEY_BYTES: usize = 255;

impl Channel {
    /// Sends a new message for `client`.
    pub async fn send(
        self: &Arc<Self>,
        client: Arc<Client>,
        req: SendRequest,
        key: Option<String>,
    ) -> Result<Receipt, Failure> {
        let request = json!({"op": "send", "direct": req.direct, "to": req.to.trim(), "content": content_value(&req.content),
                             "reply_to": req.reply_to, "thread": req.thread});
        self.once(client, key, request, move |this, client, row| async move {
            let made = async {
                let room = this.room_for(&client, req.direct, &req.to).await?;
                for (path, event) in [("reply_to", &req.reply_to), ("thread", &req.thread)] {
                    if let Some(event) = event {
                        this.event_in(event, &room, path).await?;
                    }
                }
                Ok(room)
            };
            let room = this.unless_refused(&row, made.await).await?;
            let relation = Relation { reply_to: req.reply_to.as_deref(), thread: req.thread.as_deref() };
            let pictures = this.pictures(&room, &client.persona).await;
            let content = match &req.content {
                Content::Text(text) => render::text_in(text, relation),
                Content::Rich { payload, fallback } => {
                    let (value, math) = (payload.to_value(), payload.find_math());
                    let message =
                        render::Message { fallback, payload: Some(&value), key: this.key, math: &math, pictures };
                    render::message(message, relation)
                }
            };
            let content = this.unless_refused(&row, content.map_err(render_failure)).await?;
            let write = Write { id: WriteId::agent(row.id), room: &room, persona: &client.persona };
            let sent = this.outbox.send(&write, &content, req.thread.as_deref()).await;
            let event = this.written(&client, sent)?;
            this.done(&client, row.id, &room, &event, &event).await
        })
        .await
    }

    /// Edits a message `client` sent, at the edit pace (a faster edit waits its slot).
    pub async fn edit(
        self: &Arc<Self>,
        client: Arc<Client>,
        req: EditRequest,
        key: Option<String>,
    ) -> Result<Receipt, Failure> {
        let request = json!({"op": "edit", "message_id": req.message_id, "content": content_value(&req.content)});
        self.once(client, key, request, move |this, client, row| async move {
            let made = async {
                let sent = this.own_message(&client, &req.message_id).await?;
                let original: OwnedEventId = sent.replaces.clone().unwrap_or_else(|| req.message_id.clone());
                this.paced(&client)?;
                this.still_allowed(&client, &sent.room_id).await?;
                Ok((sent.room_id, original))
            };
            let (room, original) = this.unless_refused(&row, made.await).await?;
            let (fallback, payload) = match &req.content {
                Content::Text(text) => (text.as_str(), None),
                Content::Rich { payload, fallback } => (fallback.as_str(), Some(payload)),
            };
            let math = payload.map(|p| p.find_math()).unwrap_or_default();
            let value = payload.map(|p| p.to_value());
            let pictures = this.pictures(&room, &client.persona).await;
            let message = render::Message { fallback, payload: value.as_ref(), key: this.key, math: &math, pictures };
            let content = render::edit(&original, message);
            let content = this.unless_refused(&row, content.map_err(render_failure)).await?;
            let write = Write { id: WriteId::agent(row.id), room: &room, persona: &client.persona };
            let edited = this.outbox.edit(&write, &original, &content).await;
            let (event, waited) = match edited {
                Ok((event, waited)) => (Ok(event), waited),
                Err(e) => (Err(e), 0),
            };
            let event = this.written(&client, event)?;
            crate::metrics::Metrics::add(&this.metrics.edit_wait_ms, waited);
            this.done(&client, row.id, &room, &original, &event).await
        })
        .await
    }

    /// Runs a writing call: its ledger row first (or the one an earlier call with its key
    /// made); a finished earlier call's receipt; else `work` with the row. In its own
    /// task, so the caller hanging up does not stop a write half way.
    async fn once<F, Fut>(
        self: &Arc<Self>,
        client: Arc<Client>,
        key: Option<String>,
        request: Value,
        work: F,
    ) -> Result<Receipt, Failure>
    where
        F: FnOnce(Arc<Self>, Arc<Client>, AgentRequest) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Receipt, Failure>> + Send + 'static,
    {
        let this = self.clone();
        let call = async move {
            // One call per key at a time: a twin waits, then finds the first one's receipt
            // (or, if it was refused, the key free again).
            let channel = this.clone();
            let _held = match &key {
                Some(key) => Some(channel.calls.hold((client.name.clone(), key.clone())).await),
                None => None,
            };
            let row = this.ledger(&client, key.as_deref(), &request).await?;
            match deduplicated(&row) {
                Some(done) => Ok(done),
                None => work(this, client, row).await,
            }
        };
        tokio::spawn(call).await.map_err(Failure::internal)?
    }

    /// The message `id` if `client` sent it: `unknown_message`, or `not_owner`.
    pub(super) async fn own_message(
        &self,
        client: &Client,
        id: &EventId,
    ) -> Result<crate::store::SentMessage, Failure> {
        let sent = self.store.sent_message(id).await.map_err(Failure::internal)?;
        let sent = sent.ok_or_else(|| {
            Failure::new(
                404,
                "unknown_message",
                format!("{id} is not a message richbot sent; use the message_id a send returned"),
            )
            .at("message_id")
        })?;
        let owner = match &sent.replaces {
            Some(original) => {
                self.store.sent_message(original).await.map_err(Failure::internal)?.and_then(|m| m.client)
            }
            None => sent.client.clone(),
        };
        if owner.as_deref() != Some(client.name.as_str()) {
            return Err(Failure::new(
                403,
                "not_owner",
                format!("{id} was not sent by client {}; a client edits and reads only its own messages", client.name),
            )
            .at("message_id"));
        }
        Ok(sent)
    }

    /// The ledger row of this call (or of the first call with its key).
    async fn ledger(&self, client: &Client, key: Option<&str>, request: &Value) -> Result<AgentRequest, Failure> {
        if let Some(key) = key
            && (key.is_empty() || key.len() > MAX_KEY_BYTES || key.chars().any(char::is_control))
        {
            return Err(Failure::invalid(
                "idempotency_key",
                format!("idempotency_key must be 1-{MAX_KEY_BYTES} bytes without control characters"),
            ));
        }
        let hash = format!("{:x}", Sha256::digest(request.to_string().as_bytes()));
        let now = now_ms();
        let window_start = now - crate::clock::ms(self.window);
        let row =
            self.store.agent_request(&client.name, key, &hash, now, window_start).await.map_err(Failure::internal)?;
        if !row.same {
            return Err(Failure::new(
                409,
                "idempotency_conflict",
                "this idempotency_key was used for another request; use a new key for a new message",
            )
            .at("idempotency_key"));
        }
        Ok(row)
    }

    /// A call that is to write takes one of the client's writes this minute: a fresh one,
    /// and a repeat of one that never landed alike (a repeat with a receipt never gets
    /// here), so no number of calls with one key writes past the pace.
    pub(super) fn paced(&self, client: &Client) -> Result<(), Failure> {
        self.rate.take(&client.name, client.writes_per_minute, Instant::now()).map_err(|secs| {
            self.metrics.agent_write(&client.name, "rate_limited");
            Failure {
                retry_after: Some(secs),
                ..Failure::new(
                    429,
                    "rate_limited",
                    format!(
                        "client {} may make {} writes a minute; try again in {secs} s",
                        client.name, client.writes_per_minute
                    ),
                )
            }
        })
    }

    /// A fresh call refused before its write leaves no row behind (its key is free again).
    /// How a message in `room` shows its pictures: inline unless the room is encrypted
    /// (or its encryption cannot be told), where no picture is shown by a clear URL.
    async fn pictures(&self, room: &ruma::RoomId, persona: &ruma::UserId) -> render::Pictures<'static> {
        match self.outbox.encrypted(room, persona).await {
            Ok(false) => render::Pictures::inline(&[]),
            _ => render::Pictures::default(),
        }
    }

    async fn unless_refused<T>(&self, row: &AgentRequest, result: Result<T, Failure>) -> Result<T, Failure> {
        if result.is_err() && row.fresh {
            self.store.forget_agent_request(row.id).await.map_err(Failure::internal)?;
        }
        result
    }

    /// The outcome of the outbox write, as the caller hears it.
    fn written(&self, client: &Client, result: Result<OwnedEventId, outbox::Error>) -> Result<OwnedEventId, Failure> {
        let failure = match result {
            Ok(event) => return Ok(event),
            Err(outbox::Error::Refused(reason)) => {
                Failure::new(502, "send_failed", format!("the homeserver refused the message: {reason}"))
            }
            Err(outbox::Error::Unavailable(reason)) => Failure::unavailable(reason),
            Err(e @ outbox::Error::Unencrypted(_)) => Failure::new(409, "encryption_unavailable", e.to_string()),
            Err(outbox::Error::NotOwner) => Failure::new(403, "not_owner", "not a message this client sent"),
            Err(e) => Failure::internal(e),
        };
        self.metrics.agent_write(&client.name, failure.code);
        Err(failure)
    }

    async fn done(
        &self,
        client: &Client,
        id: i64,
        room: &RoomId,
        message: &EventId,
        event: &EventId,
    ) -> Result<Receipt, Failure> {
        self.store.agent_request_done(id, &client.name, room, message, event).await.map_err(Failure::internal)?;
        self.metrics.agent_write(&client.name, "ok");
        Ok(Receipt {
            message_id: message.to_string(),
            room_id: room.to_string(),
            event_id: event.to_string(),
            deduplicated: false,
        })
    }
}

/// The receipt of a finished earlier call with the same key.
fn deduplicated(row: &AgentRequest) -> Option<Receipt> {
    let (room, message, event) = row.receipt.as_ref()?;
    Some(Receipt {
        message_id: message.to_string(),
        room_id: room.to_string(),
        event_id: event.to_string(),
        deduplicated: true,
    })
}

fn content_value(content: &Content) -> Value {
    match content {
        Content::Text(text) => json!({"text": text}),
        Content::Rich { payload, fallback } => json!({"payload": payload.to_value(), "fallback": fallback}),
    }
}

fn render_failure(e: render::Error) -> Failure {
    match e {
        render::Error::TooLarge(_) => Failure::invalid("payload", e.to_string()),
        render::Error::Numbers(b) => Failure::invalid(&format!("payload.{}", b.path), b.to_string()),
    }
}
