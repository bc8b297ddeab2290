//! Another appservice on the test Synapse, as a bridge would be: interested in the rooms
//! whose alias starts `#bridged_`, answering every transaction with 200. Synapse numbers
//! all its appservices' transactions from one sequence, so each transaction it gets is a
//! number richbot's skip.

use std::path::Path;

use axum::Json;
use serde_json::json;

/// The alias prefix of the rooms the bridge is interested in (`#bridged_…:localhost`).
pub const ALIAS_PREFIX: &str = "bridged_";

/// Serves the bridge on a free loopback port and writes its registration to `path`.
pub async fn start(path: &Path) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let yaml = format!(
        "id: bridge\nurl: \"http://{addr}\"\nas_token: \"bridge_as_token_0123456789\"\nhs_token: \"bridge_hs_token_0123456789\"\n\
         sender_localpart: bridge\nrate_limited: false\nnamespaces:\n  users: []\n  aliases:\n    - exclusive: false\n      \
         regex: '#{ALIAS_PREFIX}.*:localhost'\n  rooms: []\n"
    );
    std::fs::write(path, yaml).expect("bridge registration");
    let app = axum::Router::new().fallback(|| async { Json(json!({})) });
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve the bridge") });
}
