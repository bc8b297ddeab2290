//! Every appservice route requires the homeserver token: `Authorization: Bearer <hs_token>`
//! or the legacy `?access_token=` (both present: they must match). Missing: 401
//! `M_MISSING_TOKEN`; wrong: 403 `M_FORBIDDEN`. Compared in constant time.
//!
//! A refused request is logged at WARN with its usual cause (the homeserver has another
//! `hs_token` than the registration richbot reads), at most once a minute, so a homeserver
//! retrying with the wrong token is visible without flooding the log.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::{ApiError, AppState};

pub async fn require_hs_token(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let header = request.headers().get(AUTHORIZATION).map(|v| v.to_str().ok().and_then(|s| s.strip_prefix("Bearer ")));
    let query = request.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("access_token="))
            .map(|t| percent_encoding::percent_decode_str(t).decode_utf8_lossy().into_owned())
    });
    let matches = |t: &str| bool::from(t.as_bytes().ct_eq(state.hs_token.as_bytes()));
    let verdict = match (header, query.as_deref()) {
        (None, None) => Err(ApiError::MissingToken),
        (Some(None), _) => Err(ApiError::Forbidden),
        (Some(Some(h)), Some(q)) if h != q => Err(ApiError::Forbidden),
        (Some(Some(t)), _) | (None, Some(t)) => {
            if matches(t) {
                Ok(())
            } else {
                Err(ApiError::Forbidden)
            }
        }
    };
    match verdict {
        Ok(()) => next.run(request).await,
        Err(e) => {
            if state.refusals.due(crate::clock::now_ms()) {
                tracing::warn!(
                    path = %request.uri().path(),
                    refused = ?e,
                    "refused a request without the registration's hs_token: if it comes from the homeserver, it \
                     has a different hs_token than the registration richbot reads; give it the same file and \
                     restart it (at most one such line a minute)"
                );
            }
            e.into_response()
        }
    }
}

/// At most one log line a minute.
#[derive(Debug, Default)]
pub struct OncePerMinute {
    last: std::sync::atomic::AtomicI64,
}

impl OncePerMinute {
    /// Whether to log now (and, if so, not again for a minute).
    pub fn due(&self, now: i64) -> bool {
        use std::sync::atomic::Ordering;
        let last = self.last.load(Ordering::Relaxed);
        (last == 0 || now - last >= 60_000)
            && self.last.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }
}
