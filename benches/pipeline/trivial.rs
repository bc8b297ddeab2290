//! The bot that does nothing, for the `synapse` scenario: an appservice that stores
//! nothing, calls no model and answers every message in its rooms with "ok" at once. Its
//! time to an answer through Synapse is the floor richbot's is compared with.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::routing::put;
use serde_json::{Value, json};

/// The stand-in's user, its registration's `sender_localpart`.
pub const USER: &str = "@trivial:localhost";

struct Bot {
    hs: String,
    as_token: String,
    http: reqwest::Client,
    next: AtomicU64,
}

/// Writes the stand-in's registration (for a bot on `addr`) to `path`.
pub fn registration(path: &std::path::Path, addr: SocketAddr, as_token: &str) {
    let yaml = format!(
        "id: trivial\nurl: \"http://{addr}\"\nas_token: \"{as_token}\"\nhs_token: \"trivial_hs_token_0123456789\"\n\
         sender_localpart: trivial\nrate_limited: false\nnamespaces:\n  users:\n    - exclusive: true\n      \
         regex: '@trivial_.*:localhost'\n  aliases: []\n  rooms: []\n"
    );
    std::fs::write(path, yaml).expect("registration");
}

/// Binds the stand-in's port (the registration needs it before Synapse starts).
pub async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind")
}

/// Serves the stand-in on `listener`, acting on homeserver `hs` with `as_token`.
pub fn serve(listener: tokio::net::TcpListener, hs: &str, as_token: &str) {
    let bot = Arc::new(Bot {
        hs: hs.to_owned(),
        as_token: as_token.to_owned(),
        http: reqwest::Client::new(),
        next: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/_matrix/app/v1/transactions/{txn}", put(transaction))
        .fallback(|| async { axum::Json(json!({})) })
        .with_state(bot);
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
}

/// Joins the rooms it is invited to and answers each message from someone else; the
/// transaction's 200 does not wait for either.
async fn transaction(State(bot): State<Arc<Bot>>, axum::Json(body): axum::Json<Value>) -> axum::Json<Value> {
    for event in body["events"].as_array().into_iter().flatten() {
        let (room, sender) = (event["room_id"].as_str().unwrap_or(""), event["sender"].as_str().unwrap_or(""));
        let path = if event["type"] == "m.room.member"
            && event["state_key"] == USER
            && event["content"]["membership"] == "invite"
        {
            Some((reqwest::Method::POST, format!("/rooms/{}/join", enc(room)), json!({})))
        } else if event["type"] == "m.room.message" && sender != USER {
            let txn = bot.next.fetch_add(1, Ordering::Relaxed);
            let body = json!({"msgtype": "m.text", "body": "ok"});
            Some((reqwest::Method::PUT, format!("/rooms/{}/send/m.room.message/t{txn}", enc(room)), body))
        } else {
            None
        };
        if let Some((method, path, body)) = path {
            let bot = bot.clone();
            tokio::spawn(async move {
                let url = format!("{}/_matrix/client/v3{path}", bot.hs);
                let _ = bot.http.request(method, url).bearer_auth(&bot.as_token).json(&body).send().await;
            });
        }
    }
    axum::Json(json!({}))
}

/// Percent-encodes a room id for a path.
pub fn enc(s: &str) -> String {
    s.replace('!', "%21").replace(':', "%3A")
}
