//! A tiny round-robin HTTP proxy, as a load balancer in front of several instances would
//! be: each request goes to the next backend in turn; one that does not answer (a dead
//! instance) is skipped for the next, as a balancer's health check would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

#[derive(Clone)]
struct Backends {
    addrs: Arc<Vec<SocketAddr>>,
    next: Arc<AtomicUsize>,
    http: reqwest::Client,
}

/// Serves the proxy on `listener` until the task is dropped.
pub fn start(listener: tokio::net::TcpListener, backends: Vec<SocketAddr>) -> tokio::task::JoinHandle<()> {
    // A frozen backend accepts connections and never answers: given up on, as a
    // balancer's health check would, and the request goes to the next.
    let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(5)).build().expect("client");
    let state = Backends { addrs: Arc::new(backends), next: Arc::default(), http };
    let app = axum::Router::new().fallback(forward).with_state(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    })
}

async fn forward(State(b): State<Backends>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    for _ in 0..b.addrs.len() {
        let addr = b.addrs[b.next.fetch_add(1, Ordering::Relaxed) % b.addrs.len()];
        let mut request = b.http.request(method.clone(), format!("http://{addr}{path}")).body(body.clone());
        for (name, value) in &headers {
            if name != "host" && name != "content-length" {
                request = request.header(name, value);
            }
        }
        let Ok(answer) = request.send().await else { continue };
        let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
        let content_type = answer.headers().get("content-type").cloned();
        let bytes = answer.bytes().await.unwrap_or_default();
        let mut response = (status, bytes).into_response();
        if let Some(ct) = content_type {
            response.headers_mut().insert("content-type", ct);
        }
        return response;
    }
    (StatusCode::BAD_GATEWAY, "no backend answered").into_response()
}
