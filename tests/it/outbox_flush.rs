//! A new message's claim is on disk before it is posted (`database.synchronous =
//! "full"`): a power cut after the post cannot lose the record that it was made, so no
//! new turn posts it again. An edit waits for no flush: made again, it reuses its
//! transaction id, which the homeserver answers with the same event.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::Method;
use ruma::{room_id, user_id};
use serde_json::json;

use richbot::outbox::{Outbox, Write, WriteId};
use richbot::store::Store;

/// A homeserver stand-in that notes the store's flush count as each PUT arrives.
async fn homeserver(store: Store, seen: Arc<Mutex<Vec<u64>>>) -> String {
    let app = Router::new()
        .fallback(|State((store, seen)): State<(Store, Arc<Mutex<Vec<u64>>>)>, method: Method| async move {
            if method == Method::PUT {
                seen.lock().expect("seen").push(store.flushes());
            }
            let n = seen.lock().expect("seen").len();
            axum::Json(json!({"event_id": format!("$landed{n}")}))
        })
        .with_state((store, seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    url
}

#[tokio::test]
async fn a_new_message_is_flushed_to_disk_before_it_is_posted_and_an_edit_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await.expect("open");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let url = homeserver(store.clone(), seen.clone()).await;
    let matrix = richbot::matrix::Client::new(&url, "as_token", Default::default());
    let outbox = Outbox::new(matrix, store.clone(), "i".to_owned(), 0);
    let (room, persona) = (room_id!("!r:x"), user_id!("@richbot:x"));
    let before = store.flushes();
    let first = Write { id: WriteId::agent(1), room, persona };
    let sent = outbox.send(&first, &json!({"msgtype": "m.text", "body": "hello"}), None).await.expect("sent");
    assert_eq!(seen.lock().expect("seen")[..], [before + 1], "the claim was flushed, then posted");
    let after_send = store.flushes();
    let edit = Write { id: WriteId::agent(2), room, persona };
    let content = json!({"msgtype": "m.text", "body": "* hi", "m.new_content": {"msgtype": "m.text", "body": "hi"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": sent}});
    outbox.edit(&edit, &sent, &content).await.expect("edited");
    assert_eq!(seen.lock().expect("seen")[1], after_send, "no flush before an edit");
}
