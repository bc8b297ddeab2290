//! `GET /_matrix/app/v1/users/{userId}` (and the legacy `/users/{userId}`).
//! <https://spec.matrix.org/v1.13/application-service-api/#get_matrixappv1usersuserid>
//!
//! The homeserver asks whether a user in our namespace exists (someone invited it). A
//! configured persona is registered on the spot (the spec's lazy creation: the answer
//! must come after the user exists) and gets 200; anything else is 404.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use ruma::UserId;
use serde_json::json;

use super::{ApiError, AppState};

pub async fn query_user_id(State(state): State<AppState>, Path(user_id): Path<String>) -> Response {
    let Ok(user) = UserId::parse(user_id.as_str()) else { return ApiError::NotFound.into_response() };
    if !state.personas.is_persona(&user) {
        return ApiError::NotFound.into_response();
    }
    match state.personas.ensure_registered(&user).await {
        Ok(()) => Json(json!({})).into_response(),
        Err(e) => {
            tracing::warn!(%user, error = %e, "could not register a persona the homeserver asked about");
            ApiError::Unavailable.into_response()
        }
    }
}
