//! The channel's HTTP face: `POST /v1/send`, `POST /v1/edit`,
//! `GET /v1/messages/{message_id}/replies`, `POST` / `GET /v1/schedules`,
//! `DELETE /v1/schedules/{id}`, and the MCP server at `POST /mcp`, all behind
//! a client's bearer token. Bodies are read as JSON here (not by an extractor), so a
//! malformed one gets the same failure object as any other refusal.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::Value;

use super::{Channel, Client, Failure, parse};

/// Largest request body: a rich message's payload and fallback fit many times over.
const MAX_BODY: usize = 1024 * 1024;

/// The channel's routes.
pub fn router(channel: Arc<Channel>) -> Router {
    let mcp = Router::new()
        .route_service("/mcp", super::tools::service(channel.clone()))
        .layer(axum::middleware::from_fn_with_state(channel.clone(), authenticate));
    Router::new()
        .route("/v1/send", post(send))
        .route("/v1/edit", post(edit))
        .route("/v1/messages/{message_id}/replies", get(replies))
        .route("/v1/schedules", post(schedule).get(schedules))
        .route("/v1/schedules/{id}", delete(unschedule))
        .with_state(channel)
        .merge(mcp)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn(bounded))
}

/// Every route's body, read up to `MAX_BODY` here: one over it is refused with the
/// failure object (413, `too_large`), not the framework's plain text.
async fn bounded(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Err(_) => failure(Failure::new(
            413,
            "too_large",
            format!("the request body is over {} KiB; send a smaller message", MAX_BODY / 1024),
        )),
    }
}

/// The client a request's bearer token is, or 401.
fn client(channel: &Channel, headers: &HeaderMap) -> Result<Arc<Client>, Failure> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    token.and_then(|t| channel.client(t)).ok_or_else(Failure::unauthorized)
}

/// For `/mcp`: the client rides along in the request's extensions to the tool handler.
async fn authenticate(State(channel): State<Arc<Channel>>, mut request: Request, next: Next) -> Response {
    match client(&channel, request.headers()) {
        Ok(c) => {
            request.extensions_mut().insert(c);
            next.run(request).await
        }
        Err(f) => failure(f),
    }
}

fn json_body(body: &Bytes) -> Result<Value, Failure> {
    serde_json::from_slice(body).map_err(|e| Failure::invalid("", format!("the body is not JSON: {e}")))
}

async fn send(State(channel): State<Arc<Channel>>, headers: HeaderMap, body: Bytes) -> Response {
    let result = async {
        let client = client(&channel, &headers)?;
        let (req, key) = parse::send(&json_body(&body)?, true)?;
        channel.send(client, req, key).await
    };
    answer(result.await)
}

async fn edit(State(channel): State<Arc<Channel>>, headers: HeaderMap, body: Bytes) -> Response {
    let result = async {
        let client = client(&channel, &headers)?;
        let (req, key) = parse::edit(&json_body(&body)?)?;
        channel.edit(client, req, key).await
    };
    answer(result.await)
}

async fn schedule(State(channel): State<Arc<Channel>>, headers: HeaderMap, body: Bytes) -> Response {
    let result = async {
        let client = client(&channel, &headers)?;
        channel.schedule(&client, &json_body(&body)?).await
    };
    answer(result.await)
}

async fn schedules(State(channel): State<Arc<Channel>>, headers: HeaderMap) -> Response {
    let result = async { channel.schedules(&*client(&channel, &headers)?).await };
    answer(result.await)
}

async fn unschedule(State(channel): State<Arc<Channel>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let result = async {
        let client = client(&channel, &headers)?;
        let id = id.trim().parse::<i64>().map_err(|_| Failure::invalid("id", "the path must hold a schedule's id"))?;
        channel.unschedule(&client, id).await
    };
    answer(result.await)
}

#[derive(serde::Deserialize)]
struct Since {
    since: Option<String>,
}

async fn replies(
    State(channel): State<Arc<Channel>>,
    Path(message_id): Path<String>,
    Query(since): Query<Since>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let client = client(&channel, &headers)?;
        let message = ruma::EventId::parse(message_id.trim()).map_err(|_| {
            Failure::invalid("message_id", "the path must hold a message_id (\"$...\", percent-encoded)")
        })?;
        channel.replies(&client, &message, since.since.as_deref()).await
    };
    match result.await {
        Ok(v) => axum::Json(v).into_response(),
        Err(f) => failure(f),
    }
}

fn answer<T: serde::Serialize>(result: Result<T, Failure>) -> Response {
    match result {
        Ok(receipt) => axum::Json(receipt).into_response(),
        Err(f) => failure(f),
    }
}

/// A failure as its status, its object, and for 429 a `Retry-After`.
fn failure(f: Failure) -> Response {
    let status = StatusCode::from_u16(f.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(f.to_value())).into_response();
    if let Some(secs) = f.retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if f.status == 401 {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}
