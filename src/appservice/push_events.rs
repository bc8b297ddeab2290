//! `PUT /_matrix/app/v1/transactions/{txnId}` (and the legacy `/transactions/{txnId}`).
//! <https://spec.matrix.org/v1.13/application-service-api/#put_matrixappv1transactionstxnid>
//!
//! Validates, commits the events to the inbox, answers `{}`. Nothing else: no homeserver
//! or LLM call happens here, so the homeserver is never held up (a slow or failed answer
//! puts it into exponential back-off). A storage failure answers 503 so it retries.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{ApiError, AppState, error::json_object};

pub async fn push_events(
    State(state): State<AppState>,
    Path(txn_id): Path<String>,
    body: Result<bytes::Bytes, BytesRejection>,
) -> Response {
    let mut body = match json_object(body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let events = match body.remove("events") {
        Some(Value::Array(events)) => events,
        None => return ApiError::BadJson("\"events\" is required").into_response(),
        Some(_) => return ApiError::BadJson("\"events\" must be an array").into_response(),
    };
    // `ephemeral` / `de.sorunome.msc2409.*` (typing, receipts) are accepted and not needed.
    match state.inbox.accept(&txn_id, events).await {
        Ok(_) => Json(json!({})).into_response(),
        Err(e) => {
            tracing::error!(txn_id, error = %e, "could not store a transaction; the homeserver will retry it");
            ApiError::Unavailable.into_response()
        }
    }
}
