//! The homeserver -> appservice HTTP edge (Matrix Application Service API), one file per
//! endpoint, named after ruma's endpoint modules. `router(state)` builds the whole app so
//! tests can drive it in-process with `oneshot`.
//!
//! Routes answer only after their work is durable (transactions) or done (user query);
//! none calls the LLM. Every Matrix route sits behind the homeserver token (`auth.rs`);
//! every error is Matrix error JSON (`error.rs`).

mod auth;
mod connection;
mod error;
mod gaps;
mod health;
mod push_events;
mod query_room_alias;
mod query_user_id;
mod send_ping;
mod serve;

pub use serve::{DEFAULT_MAX_CONNECTIONS, connection_cap, serve};

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};

pub use error::ApiError;

use crate::inbox::Inbox;
use crate::personas::Personas;

/// What the handlers share. axum clones the state for every request (twice on a Matrix
/// route: the token check and the handler), so it is one `Arc`: a clone of the fields
/// themselves (the store's pools, the personas' HTTP client and its strings, the door's
/// patterns) cost an allocation and a few dozen atomic counts per request, about 5% of
/// the CPU of ingest in a profile.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// The fields of [`AppState`].
#[derive(Clone)]
pub struct Shared {
    hs_token: Arc<str>,
    inbox: Inbox,
    personas: Personas,
    refusals: Arc<auth::OncePerMinute>,
    /// Transactions being handled; one permit each, taken before the body is read.
    transactions: Arc<tokio::sync::Semaphore>,
    /// Transaction numbers seen, to ask for ones skipped (`gaps.rs`).
    gaps: Option<gaps::Gaps>,
    /// Largest body read (413 `M_TOO_LARGE` above it).
    max_body: usize,
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl AppState {
    /// `hs_token` is the registration's homeserver token, which every Matrix route requires.
    pub fn new(hs_token: &str, inbox: Inbox, personas: Personas) -> Self {
        Self::with_limit(hs_token, inbox, personas, 4)
    }

    /// Like [`AppState::new`], handling at most `concurrent` transactions at once.
    pub fn with_limit(hs_token: &str, inbox: Inbox, personas: Personas, concurrent: usize) -> Self {
        let transactions = Arc::new(tokio::sync::Semaphore::new(concurrent.max(1)));
        let max_body = usize::MAX;
        Self(Arc::new(Shared {
            hs_token: Arc::from(hs_token),
            inbox,
            personas,
            refusals: Arc::default(),
            transactions,
            gaps: None,
            max_body,
        }))
    }

    /// Asks the homeserver for transactions it skipped (`gaps.rs`), their numbers kept in
    /// `store`.
    pub fn asking_for_skipped(self, store: crate::store::Store) -> Self {
        Self(Arc::new(Shared { gaps: Some(gaps::Gaps::new(store)), ..Arc::unwrap_or_clone(self.0) }))
    }
}

/// The appservice router. `max_body` bounds a request body (413 `M_TOO_LARGE` above it).
pub fn router(state: AppState, max_body: usize) -> Router {
    let state = AppState(Arc::new(Shared { max_body, ..Arc::unwrap_or_clone(state.0) }));
    let matrix = Router::new()
        .route("/_matrix/app/v1/transactions/{txn_id}", put(push_events::push_events))
        .route("/transactions/{txn_id}", put(push_events::push_events))
        .route("/_matrix/app/v1/users/{user_id}", get(query_user_id::query_user_id))
        .route("/users/{user_id}", get(query_user_id::query_user_id))
        .route("/_matrix/app/v1/rooms/{alias}", get(query_room_alias::query_room_alias))
        .route("/rooms/{alias}", get(query_room_alias::query_room_alias))
        .route("/_matrix/app/v1/ping", post(send_ping::send_ping))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_hs_token));
    Router::new()
        .merge(matrix)
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .fallback(|| async { ApiError::Unrecognized })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}
