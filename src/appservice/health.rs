//! `GET /health` (liveness: the process answers) and `GET /ready` (the database answers).
//! Not part of the Matrix API and not behind the homeserver token: for load balancers and
//! orchestrators.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;

pub async fn health() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

pub async fn ready(State(state): State<AppState>) -> Response {
    match state.inbox.ready().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check: database unavailable");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response()
        }
    }
}
