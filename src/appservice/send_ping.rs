//! `POST /_matrix/app/v1/ping`.
//! <https://spec.matrix.org/v1.13/application-service-api/#post_matrixappv1ping>
//!
//! The homeserver checks it can reach us (Synapse sends `{"transaction_id": null}` when
//! the client gave none). Any JSON object is fine; the answer is `{}`.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::error::json_object;

pub async fn send_ping(body: Result<bytes::Bytes, BytesRejection>) -> Response {
    match json_object(body) {
        Ok(body) => {
            tracing::debug!(transaction_id = ?body.get("transaction_id"), "pinged by the homeserver");
            Json(json!({})).into_response()
        }
        Err(e) => e.into_response(),
    }
}
