//! The homeserver side of ingest: `PUT /_matrix/app/v1/transactions/{txnId}` with the
//! homeserver token and `{"events": [...]}`, like Synapse sends them (one at a time per
//! appservice; `conc` > 1 is the stress case), every answer checked to be 200.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::server::HS_TOKEN;

/// A new event id as Synapse makes them in rooms of version 4 on: `$` and the unpadded
/// URL-safe base64 of a SHA-256 (here random bytes), so ids land all over the `event_id`
/// index as real ones do, not one after another.
pub fn event_id() -> String {
    use base64::Engine;
    format!("${}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()))
}

/// One event: `m.room.message` from one of eight senders (none a persona).
pub fn message(id: &str, room: &str, n: u64, body: &str) -> Value {
    const SENDERS: [&str; 8] = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"];
    json!({"type": "m.room.message", "room_id": room, "sender": format!("@{}:localhost", SENDERS[(n % 8) as usize]),
           "event_id": id, "origin_server_ts": richbot::clock::now_ms(), "content": {"msgtype": "m.text", "body": body}})
}

/// A member event (`who` joins `room`).
pub fn join(id: &str, room: &str, who: &str) -> Value {
    json!({"type": "m.room.member", "room_id": room, "sender": who, "state_key": who, "event_id": id,
           "origin_server_ts": richbot::clock::now_ms(), "content": {"membership": "join"}})
}

/// Sends one transaction; returns when its 200 arrived.
pub async fn put(http: &reqwest::Client, url: &str, txn: &str, events: &[Value]) -> Instant {
    let body = json!({"events": events}).to_string();
    let answer = http
        .put(format!("{url}/_matrix/app/v1/transactions/{txn}"))
        .bearer_auth(HS_TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("transaction sent");
    assert_eq!(answer.status(), 200, "transaction {txn}: {:?}", answer.text().await);
    Instant::now()
}

/// What a load run saw.
pub struct Figures {
    pub events: u64,
    pub elapsed: Duration,
    /// Ack latency of every transaction.
    pub acks: Vec<Duration>,
}

/// `conc` senders, each sending transactions of `per_txn` messages spread over `rooms`
/// back to back for `secs`.
pub async fn run(url: &str, per_txn: usize, conc: usize, rooms: &[String], secs: f64) -> Figures {
    let nonce: u64 = rand::random();
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for c in 0..conc {
        let (url, rooms) = (url.to_owned(), rooms.to_vec());
        tasks.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut acks = Vec::new();
            let mut n: u64 = 0;
            while Instant::now() < until {
                let events: Vec<Value> = (0..per_txn)
                    .map(|_| {
                        n += 1;
                        let room = &rooms[(n as usize * 7 + c) % rooms.len()];
                        message(&event_id(), room, n, &format!("hello all, message {n}"))
                    })
                    .collect();
                let sent = Instant::now();
                let acked = put(&http, &url, &format!("b{nonce}x{c}x{n}"), &events).await;
                acks.push(acked - sent);
            }
            acks
        }));
    }
    let mut acks = Vec::new();
    for t in tasks {
        acks.extend(t.await.expect("sender"));
    }
    let elapsed = start.elapsed();
    Figures { events: (acks.len() * per_txn) as u64, elapsed, acks }
}

/// The `p`-th percentile of `values` (sorted here).
pub fn pct(values: &mut [Duration], p: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort_unstable();
    let k = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[k.clamp(1, values.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
