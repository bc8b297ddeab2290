//! The `synapse` scenario (only when named: it installs Synapse from PyPI with the tests'
//! script and starts it): richbot and the bot that does nothing (`trivial.rs`) registered
//! side by side on one real Synapse, each in a DM with the same people. A person asks and
//! waits, through `/sync` as a client does, for the answer; the LLM stand-in answers at
//! once, so the difference between the two bots is richbot's whole cost through a real
//! homeserver. One question at a time (alternating the bots), then every person at once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::load::{ms, pct};
use crate::server::Server;
use crate::stand_in::{self, Shared};
use crate::trivial;

#[allow(dead_code, unused_imports)]
#[path = "../../tests/it/support/synapse.rs"]
mod hs;

const PERSONA: &str = "@richbot:localhost";
const TRIVIAL_TOKEN: &str = "trivial_as_token_0123456789abcdef";

/// A person, driven over the client-server API.
struct Person {
    http: reqwest::Client,
    hs: String,
    token: String,
    since: String,
    sent: u64,
}

impl Person {
    async fn register(hs: &str, name: &str) -> Self {
        let http = reqwest::Client::new();
        let url = format!("{hs}/_matrix/client/v3/register");
        let mut body = json!({"username": name, "password": "correct horse battery"});
        let first: Value = http.post(&url).json(&body).send().await.expect("register").json().await.expect("json");
        body["auth"] = json!({"type": "m.login.dummy", "session": first["session"]});
        let done: Value = http.post(&url).json(&body).send().await.expect("register").json().await.expect("json");
        let token = done["access_token"].as_str().unwrap_or_else(|| panic!("registered: {done}")).to_owned();
        Self { http, hs: hs.to_owned(), token, since: String::new(), sent: 0 }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}/_matrix/client/v3{path}", self.hs);
        let resp = self.http.request(method, url).bearer_auth(&self.token).json(&body).send().await.expect(path);
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.expect("json")
    }

    /// A DM with `bot`, once the bot has joined it.
    async fn dm(&self, bot: &str) -> String {
        let body = json!({"invite": [bot], "is_direct": true, "preset": "private_chat"});
        let room =
            self.call(reqwest::Method::POST, "/createRoom", body).await["room_id"].as_str().expect("id").to_owned();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let path = format!("/rooms/{}/joined_members", trivial::enc(&room));
            let members = self.call(reqwest::Method::GET, &path, Value::Null).await;
            if members["joined"].get(bot).is_some() {
                return room;
            }
            assert!(Instant::now() < deadline, "{bot} did not join {room}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One `/sync` from where the last left off: the message events that came, by room.
    async fn sync(&mut self, timeout_ms: u64) -> Vec<(String, String)> {
        let filter = json!({"room": {"timeline": {"limit": 20}, "state": {"lazy_load_members": true}},
                            "presence": {"types": []}, "account_data": {"types": []}})
        .to_string();
        let mut query = vec![("timeout", timeout_ms.to_string()), ("filter", filter)];
        if !self.since.is_empty() {
            query.push(("since", self.since.clone()));
        }
        let url = format!("{}/_matrix/client/v3/sync", self.hs);
        let resp = self.http.get(url).bearer_auth(&self.token).query(&query).send().await.expect("sync");
        let v: Value = resp.json().await.expect("json");
        self.since = v["next_batch"].as_str().expect("next_batch").to_owned();
        let mut seen = Vec::new();
        for (room, r) in v["rooms"]["join"].as_object().into_iter().flatten() {
            for e in r["timeline"]["events"].as_array().into_iter().flatten() {
                if e["type"] == "m.room.message" {
                    seen.push((room.clone(), e["sender"].as_str().unwrap_or("").to_owned()));
                }
            }
        }
        seen
    }

    /// Asks `bot` in `room`; the time until the answer reaches this person's `/sync`.
    async fn ask(&mut self, room: &str, bot: &str) -> Duration {
        self.sent += 1;
        let path = format!("/rooms/{}/send/m.room.message/q{}", trivial::enc(room), self.sent);
        let start = Instant::now();
        self.call(reqwest::Method::PUT, &path, json!({"msgtype": "m.text", "body": format!("q-{}", self.sent)})).await;
        loop {
            if self.sync(30_000).await.iter().any(|(r, s)| r == room && s == bot) {
                return start.elapsed();
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no answer from {bot} in {room}");
        }
    }
}

/// `people` people, each in a DM with both bots; `rounds` questions each, one at a time.
/// `encryption`: richbot's `[encryption] enabled` (its DMs are not encrypted either way;
/// on, it follows the devices and keys every transaction brings, as deployed).
pub async fn compare(people: usize, rounds: usize, encryption: bool) {
    let llm = stand_in::llm(Shared::default(), Duration::ZERO).await;
    let port = hs::free_port();
    let synapse = tokio::task::spawn_blocking(move || hs::Synapse::start(&format!("http://127.0.0.1:{port}")))
        .await
        .expect("start");
    let listener = trivial::bind().await;
    let registration = synapse.dir.join("trivial.yaml");
    trivial::registration(&registration, listener.local_addr().expect("addr"), TRIVIAL_TOKEN);
    let synapse = tokio::task::spawn_blocking(move || {
        let mut synapse = synapse;
        synapse.add_appservice(&registration);
        synapse
    })
    .await
    .expect("restart");
    trivial::serve(listener, &synapse.url, TRIVIAL_TOKEN);
    let server = Server::start_registered(&synapse.url, &llm, (&synapse.registration, port), encryption).await;
    let mut asked = Vec::new();
    for i in 0..people {
        let p = Person::register(&synapse.url, &format!("p{i}")).await;
        let (ours, theirs) = (p.dm(PERSONA).await, p.dm(trivial::USER).await);
        asked.push((p, ours, theirs));
    }
    for (p, ..) in &mut asked {
        p.sync(0).await;
    }
    let cpu_before = server.cpu();
    let (mut one_rb, mut one_tb) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for (i, (p, ours, theirs)) in asked.iter_mut().enumerate() {
            if (round + i) % 2 == 0 {
                one_rb.push(p.ask(ours, PERSONA).await);
                one_tb.push(p.ask(theirs, trivial::USER).await);
            } else {
                one_tb.push(p.ask(theirs, trivial::USER).await);
                one_rb.push(p.ask(ours, PERSONA).await);
            }
        }
    }
    let cpu = server.cpu() - cpu_before;
    let answered = one_rb.len();
    let mut all_tb = everyone(&mut asked, trivial::USER).await;
    let mut all_rb = everyone(&mut asked, PERSONA).await;
    println!(
        "\n## through a real Synapse: richbot beside a bot that does nothing ({people} people, each in a DM with both; LLM instant)\n"
    );
    println!("| case | bot | n | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|---|");
    for (case, bot, v) in [
        ("one question at a time", "does nothing", &mut one_tb),
        ("one question at a time", "richbot", &mut one_rb),
        ("everyone at once", "does nothing", &mut all_tb),
        ("everyone at once", "richbot", &mut all_rb),
    ] {
        let (p50, p99, max) = (pct(v, 50.0), pct(v, 99.0), pct(v, 100.0));
        println!("| {case} | {bot} | {} | {:.1} | {:.1} | {:.1} |", v.len(), ms(p50), ms(p99), ms(max));
    }
    let ratio = |a: &mut Vec<Duration>, b: &mut Vec<Duration>, p| ms(pct(a, p)) / ms(pct(b, p));
    println!(
        "\nrichbot / the bot that does nothing: one at a time p50 {:.2}×; everyone at once max {:.2}×; richbot's CPU {:.2} ms per answer one at a time",
        ratio(&mut one_rb, &mut one_tb, 50.0),
        ratio(&mut all_rb, &mut all_tb, 100.0),
        ms(cpu) / answered as f64
    );
    drop(server);
    tokio::task::spawn_blocking(move || drop(synapse)).await.expect("stop");
}

/// Every person asks `bot` at once; the time each waited.
async fn everyone(asked: &mut [(Person, String, String)], bot: &str) -> Vec<Duration> {
    let asks = asked.iter_mut().map(|(p, ours, theirs)| {
        let room = if bot == PERSONA { ours.clone() } else { theirs.clone() };
        async move { p.ask(&room, bot).await }
    });
    futures::future::join_all(asks).await
}
