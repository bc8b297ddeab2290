//! `GET /_matrix/app/v1/rooms/{roomAlias}` (and the legacy `/rooms/{roomAlias}`).
//! <https://spec.matrix.org/v1.13/application-service-api/#get_matrixappv1roomsroomalias>
//!
//! richbot claims no aliases, so every alias is unknown.

use axum::response::{IntoResponse, Response};

use super::ApiError;

pub async fn query_room_alias() -> Response {
    ApiError::NotFound.into_response()
}
