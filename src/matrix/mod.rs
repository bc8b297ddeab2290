//! The only module that talks to the homeserver: client-server calls made as the
//! appservice (`Authorization: Bearer <as_token>`), acting as a persona with `?user_id=`.
//!
//! Every call goes through one retry policy (`retry.rs`): 429 waits as long as the server
//! asks, 5xx and connection errors back off, and any other 4xx is permanent and comes back
//! with its `errcode` so the caller can record it (and tell the model). The endpoints are a
//! dozen fixed paths with small JSON bodies; they are written out here rather than through
//! ruma's request types, which would need a `/versions` handshake threaded through every
//! call for no gain in what goes over the wire. Ids are ruma types at this boundary.

mod calls;
pub use calls::MEGOLM;
mod devices;
mod media;
mod retry;
mod upload;

use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::Method;
use ruma::UserId;
use serde_json::Value;

pub use media::parse_mxc;
pub use retry::RetryPolicy;

/// A homeserver call that did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The homeserver refused the request; retrying will not help.
    #[error("{errcode} ({status}): {error}")]
    Refused { status: u16, errcode: String, error: String },
    /// The homeserver could not be reached or kept failing; retries were exhausted.
    #[error("homeserver unavailable: {0}")]
    Unavailable(String),
}

impl Error {
    pub fn errcode(&self) -> Option<&str> {
        match self {
            Error::Refused { errcode, .. } => Some(errcode),
            Error::Unavailable(_) => None,
        }
    }
}

/// A client-server API client acting as the appservice. `Debug` leaves the token out.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    as_token: String,
    retry: RetryPolicy,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("base", &self.base).field("retry", &self.retry).finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(base: &str, as_token: &str, retry: RetryPolicy) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("richbot/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a reqwest client with static settings builds");
        Self { http, base: base.trim_end_matches('/').to_owned(), as_token: as_token.to_owned(), retry }
    }

    /// One call with retries. `path` is already percent-encoded.
    async fn call(
        &self,
        method: Method,
        path: &str,
        as_user: Option<&UserId>,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        self.call_as(method, path, as_user.map(|u| (u, None)), body).await
    }

    /// [`Client::call`] acting as a user and, if given, one of its devices (`device_id`
    /// beside `user_id`: the homeserver checks that the device exists).
    async fn call_as(
        &self,
        method: Method,
        path: &str,
        actor: Option<(&UserId, Option<&str>)>,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        let mut url = format!("{}{path}", self.base);
        if let Some((user, device)) = actor {
            url.push_str(if path.contains('?') { "&" } else { "?" });
            url.push_str("user_id=");
            url.push_str(&enc(user.as_str()));
            if let Some(device) = device {
                url.push_str("&device_id=");
                url.push_str(&enc(device));
            }
        }
        let attempt = || {
            let mut req = self.http.request(method.clone(), &url).bearer_auth(&self.as_token);
            if let Some(body) = body {
                req = req.json(body);
            }
            req.send()
        };
        self.retry.run(attempt).await
    }
}

/// Everything but RFC 3986's unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Percent-encodes one path segment or query value.
pub fn enc(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}
