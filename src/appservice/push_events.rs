//! `PUT /_matrix/app/v1/transactions/{txnId}` (and the legacy `/transactions/{txnId}`).
//! <https://spec.matrix.org/v1.13/application-service-api/#put_matrixappv1transactionstxnid>
//!
//! Validates, commits the events to the inbox, answers `{}`. Nothing else: no homeserver
//! or LLM call happens here, so the homeserver is never held up (a slow or failed answer
//! puts it into exponential back-off). A storage failure answers 503 so it retries, as
//! does a transaction stored after a skip in the homeserver's numbering (`gaps.rs`).
//!
//! The body is read only once the transaction has its permit (so at most
//! `max_concurrent_transactions` bodies are in memory at once), within [`BODY_READ`] and
//! `max_body_bytes`; one over the limit is read and dropped as it comes, then answered
//! 503 (`busy`), so the homeserver reads the answer instead of a reset connection. It is parsed as ruma's wire shape, `events: [Raw<AnyTimelineEvent>]`,
//! borrowed: each event stays the JSON text it came as, in the request's own buffer (no
//! value tree is built, nothing is copied or re-serialized before the store), and the
//! count is checked while parsing, so a body of millions of tiny events costs no more
//! than [`MAX_EVENTS`] of them. An odd event is the inbox's to count as malformed, not a
//! reason to refuse the rest.

use std::time::Duration;

use axum::Json;
use axum::body::Body as HttpBody;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde_json::json;
use serde_json::value::RawValue;

use super::{ApiError, AppState};

/// The transaction body (`events` are ruma's `Raw<AnyTimelineEvent>`, borrowed), and
/// what it carries for the personas' devices (to-device messages, device lists, key
/// counts: `crate::crypto::Extensions`), kept as text until the inbox reads it. Typing and
/// receipts (`ephemeral`) are accepted and not needed, so they are not read.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow, default)]
    events: Option<Events<'a>>,
    #[serde(borrow, default, rename = "de.sorunome.msc2409.to_device")]
    to_device: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "org.matrix.msc3202.device_lists")]
    device_lists: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "org.matrix.msc3202.device_one_time_keys_count")]
    one_time_keys: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "org.matrix.msc3202.device_unused_fallback_key_types")]
    fallback_keys: Option<&'a RawValue>,
}

impl Body<'_> {
    /// The crypto fields as one JSON object (empty when none came). A field of the wrong
    /// shape is dropped with a warning: it must not cost the transaction's events.
    fn extensions(&self) -> crate::crypto::Extensions {
        let fields = [
            ("de.sorunome.msc2409.to_device", self.to_device),
            ("org.matrix.msc3202.device_lists", self.device_lists),
            ("org.matrix.msc3202.device_one_time_keys_count", self.one_time_keys),
            ("org.matrix.msc3202.device_unused_fallback_key_types", self.fallback_keys),
        ];
        let mut out = crate::crypto::Extensions::default();
        for (key, raw) in fields {
            let Some(raw) = raw else { continue };
            let one = format!("{{{}:{}}}", serde_json::Value::from(key), raw.get());
            match serde_json::from_str::<crate::crypto::Extensions>(&one) {
                Ok(e) => out.merge(e),
                Err(e) => {
                    tracing::warn!(key, error = %e, "a transaction's crypto field is not as the spec says; ignored")
                }
            }
        }
        out
    }
}

/// The events, at most [`MAX_EVENTS`] of them (more is an error while parsing).
struct Events<'a>(Vec<&'a RawValue>);

/// Most events in one transaction (Synapse sends at most 100).
pub const MAX_EVENTS: usize = 10_000;
/// The serde error message that means "over [`MAX_EVENTS`]".
const TOO_MANY: &str = "richbot: too many events";
/// A body must arrive within this once its request is taken.
const BODY_READ: Duration = Duration::from_secs(30);

impl<'de: 'a, 'a> Deserialize<'de> for Events<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bounded;
        impl<'de> Visitor<'de> for Bounded {
            type Value = Events<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of events")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut events = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(128));
                while let Some(e) = seq.next_element::<&'de RawValue>()? {
                    if events.len() == MAX_EVENTS {
                        return Err(serde::de::Error::custom(TOO_MANY));
                    }
                    events.push(e);
                }
                Ok(Events(events))
            }
        }
        d.deserialize_seq(Bounded)
    }
}
/// Over the limit of transactions at once: 503 with `Retry-After`, once the body has been
/// read and dropped as it came (bounded by `max` bytes and [`BODY_READ`], nothing kept).
/// Answering before the body is read would close the connection with the upload unread,
/// and the homeserver would see the connection reset instead of the 503 it can act on.
async fn busy(body: HttpBody, max: usize) -> Response {
    use futures::StreamExt;
    let mut chunks = body.into_data_stream();
    let drained = tokio::time::timeout(BODY_READ, async {
        let mut read = 0usize;
        while let Some(Ok(chunk)) = chunks.next().await {
            read += chunk.len();
            if read > max {
                return false;
            }
        }
        true
    });
    let mut response = ApiError::Busy.into_response();
    if !drained.await.unwrap_or(false) {
        // Not all of it could be read: the connection is not reused.
        response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    response
}

/// Bodies larger than this are parsed on the blocking pool, off the async workers.
const PARSE_INLINE_BYTES: usize = 256 * 1024;

pub async fn push_events(State(state): State<AppState>, Path(txn_id): Path<String>, body: HttpBody) -> Response {
    // Bounded concurrency: a token holder cannot make richbot read, parse and store
    // without end; the body is not read before the permit.
    let Ok(_permit) = state.transactions.clone().try_acquire_owned() else {
        return busy(body, state.max_body).await;
    };
    let bytes = match tokio::time::timeout(BODY_READ, axum::body::to_bytes(body, state.max_body)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if is_too_large(&e) => return ApiError::TooLarge.into_response(),
        Ok(Err(_)) | Err(_) => return ApiError::NotJson.into_response(),
    };
    // A large body is parsed on the blocking pool (into owned events), a usual one in place.
    let owned: Vec<Box<RawValue>>;
    let (events, extensions): (Vec<&RawValue>, _) = if bytes.len() > PARSE_INLINE_BYTES {
        let parsed = tokio::task::spawn_blocking(move || {
            read(&bytes).map(|(events, ext)| (events.into_iter().map(RawValue::to_owned).collect::<Vec<_>>(), ext))
        });
        let extensions;
        (owned, extensions) = match parsed.await.unwrap_or(Err(ApiError::Unavailable)) {
            Ok(read) => read,
            Err(e) => return e.into_response(),
        };
        (owned.iter().map(AsRef::as_ref).collect(), extensions)
    } else {
        match read(&bytes) {
            Ok(read) => read,
            Err(e) => return e.into_response(),
        }
    };
    if let Err(e) = state.inbox.accept_with(&txn_id, &events, extensions).await {
        tracing::error!(txn_id, error = %e, "could not store a transaction; the homeserver will retry it");
        return ApiError::Unavailable.into_response();
    }
    let Some(gaps) = &state.gaps else { return Json(json!({})).into_response() };
    match gaps.stored(&txn_id, crate::clock::now_ms()).await {
        Ok(Some((first, last))) => {
            tracing::warn!(
                txn_id,
                first,
                last,
                "the homeserver skipped transactions (made, never sent); its events are stored, and a 503 \
                     makes it send the skipped ones, then this one again"
            );
            ApiError::Unavailable.into_response()
        }
        Ok(None) => Json(json!({})).into_response(),
        Err(e) => {
            tracing::error!(txn_id, error = %e, "could not note a transaction's number; the homeserver will retry it");
            ApiError::Unavailable.into_response()
        }
    }
}

/// Whether reading a body failed for its size.
fn is_too_large(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The events of a transaction body, and its crypto fields; JSON and shape errors become
/// Matrix errors.
fn read(bytes: &[u8]) -> Result<(Vec<&RawValue>, crate::crypto::Extensions), ApiError> {
    match serde_json::from_slice::<Body<'_>>(bytes) {
        Ok(body @ Body { events: Some(_), .. }) => {
            let extensions = body.extensions();
            let Some(Events(events)) = body.events else { return Err(ApiError::NotJson) };
            Ok((events, extensions))
        }
        Ok(Body { events: None, .. }) => Err(ApiError::BadJson("\"events\" is required")),
        Err(e) if e.to_string().starts_with(TOO_MANY) => Err(ApiError::TooLarge),
        Err(e) if e.is_data() && bytes.trim_ascii_start().first() == Some(&b'{') => {
            Err(ApiError::BadJson("\"events\" must be an array"))
        }
        Err(e) if e.is_data() => Err(ApiError::BadJson("Request body must be a JSON object")),
        Err(_) => Err(ApiError::NotJson),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_of_more_events_than_the_cap_is_refused_while_parsing() {
        let at_cap = format!("{{\"events\": [{}]}}", vec!["{}"; MAX_EVENTS].join(","));
        assert_eq!(read(at_cap.as_bytes()).map(|(e, _)| e.len()).ok(), Some(MAX_EVENTS));
        let over = format!("{{\"events\": [{}]}}", vec!["{}"; MAX_EVENTS + 1].join(","));
        assert!(matches!(read(over.as_bytes()), Err(ApiError::TooLarge)));
        assert!(matches!(read(b"{}"), Err(ApiError::BadJson(_))));
        assert!(matches!(read(b"{\"events\": 3}"), Err(ApiError::BadJson(_))));
    }

    #[test]
    fn a_transactions_crypto_fields_are_read_and_a_broken_one_costs_nothing_else() {
        let body = serde_json::json!({
            "events": [{"type": "m.room.message"}],
            "de.sorunome.msc2409.to_device": [
                {"type": "m.room.encrypted", "to_user_id": "@b:x", "to_device_id": "D", "sender": "@a:x", "content": {}}
            ],
            "org.matrix.msc3202.device_lists": {"changed": ["@a:x"], "left": []},
            "org.matrix.msc3202.device_one_time_keys_count": {"@b:x": {"D": {"signed_curve25519": 7}}},
            "org.matrix.msc3202.device_unused_fallback_key_types": 5,
        })
        .to_string();
        let (events, ext) = read(body.as_bytes()).expect("read");
        assert_eq!(events.len(), 1, "the events are read whatever the crypto fields hold");
        assert_eq!(ext.to_device.len(), 1);
        assert_eq!(ext.device_lists.changed, vec!["@a:x".to_owned()]);
        assert_eq!(ext.one_time_keys["@b:x"]["D"]["signed_curve25519"], 7);
        assert!(ext.fallback_keys.is_empty(), "the malformed field is dropped");
        let (_, none) = read(br#"{"events": []}"#).expect("read");
        assert!(none.is_empty());
    }
}
