//! `PUT /_matrix/app/v1/transactions/{txnId}` (and the legacy `/transactions/{txnId}`).
//! <https://spec.matrix.org/v1.13/application-service-api/#put_matrixappv1transactionstxnid>
//!
//! Validates, commits the events to the inbox, answers `{}`. Nothing else: no homeserver
//! or LLM call happens here, so the homeserver is never held up (a slow or failed answer
//! puts it into exponential back-off). A storage failure answers 503 so it retries.
//!
//! The body is read as ruma's wire shape, `events: [Raw<AnyTimelineEvent>]`, borrowed:
//! each event stays the JSON text it came as, in the request's own buffer (no value tree
//! is built, nothing is copied or re-serialized before the store), and an odd event is the
//! inbox's to count as malformed, not a reason to refuse the rest.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::{ApiError, AppState};

/// The transaction body (`events` are ruma's `Raw<AnyTimelineEvent>`, borrowed).
/// `ephemeral` / `de.sorunome.msc2409.*` (typing, receipts) are accepted and not needed,
/// so they are not read.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    events: Option<Vec<&'a RawValue>>,
}

/// Most events in one transaction (Synapse sends at most 100).
pub const MAX_EVENTS: usize = 10_000;
/// Bodies larger than this are parsed on the blocking pool, off the async workers.
const PARSE_INLINE_BYTES: usize = 256 * 1024;

pub async fn push_events(
    State(state): State<AppState>,
    Path(txn_id): Path<String>,
    body: Result<bytes::Bytes, BytesRejection>,
) -> Response {
    // Bounded concurrency: a token holder cannot make richbot parse and store without end.
    let Ok(_permit) = state.transactions.clone().try_acquire_owned() else {
        return ApiError::Busy.into_response();
    };
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return ApiError::TooLarge.into_response(),
        Err(_) => return ApiError::NotJson.into_response(),
    };
    // A large body is parsed on the blocking pool (into owned events), a usual one in place.
    let owned: Vec<Box<RawValue>>;
    let events: Vec<&RawValue> = if bytes.len() > PARSE_INLINE_BYTES {
        let parsed = tokio::task::spawn_blocking(move || {
            read(&bytes).map(|events| events.into_iter().map(RawValue::to_owned).collect::<Vec<_>>())
        });
        owned = match parsed.await.unwrap_or(Err(ApiError::Unavailable)) {
            Ok(events) => events,
            Err(e) => return e.into_response(),
        };
        owned.iter().map(AsRef::as_ref).collect()
    } else {
        match read(&bytes) {
            Ok(events) => events,
            Err(e) => return e.into_response(),
        }
    };
    if events.len() > MAX_EVENTS {
        return ApiError::TooLarge.into_response();
    }
    match state.inbox.accept(&txn_id, &events).await {
        Ok(_) => Json(json!({})).into_response(),
        Err(e) => {
            tracing::error!(txn_id, error = %e, "could not store a transaction; the homeserver will retry it");
            ApiError::Unavailable.into_response()
        }
    }
}

/// The events of a transaction body; JSON and shape errors become Matrix errors.
fn read(bytes: &[u8]) -> Result<Vec<&RawValue>, ApiError> {
    match serde_json::from_slice::<Body<'_>>(bytes) {
        Ok(Body { events: Some(events) }) => Ok(events),
        Ok(Body { events: None }) => Err(ApiError::BadJson("\"events\" is required")),
        Err(e) if e.is_data() && bytes.trim_ascii_start().first() == Some(&b'{') => {
            Err(ApiError::BadJson("\"events\" must be an array"))
        }
        Err(e) if e.is_data() => Err(ApiError::BadJson("Request body must be a JSON object")),
        Err(_) => Err(ApiError::NotJson),
    }
}
