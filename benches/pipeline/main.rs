//! richbot's own performance figures, measured on the real `richbot serve` (the binary
//! cargo builds for the benchmark, optimized), with the homeserver and the LLM stood in
//! by this process (`stand_in`), so that the cost measured is richbot's.
//!
//! `cargo bench --bench pipeline [-- SCENARIO ...] [--secs S] [--repeats N] [--prefill N]`,
//! scenarios:
//! - `ingest`: transactions of 100 / 1 events at concurrency 1 / 4 into 50 rooms no
//!   persona is in: events/s, ack latency, CPU per event, peak RSS, and how long after
//!   the load the last event was handled (the backlog); then with
//!   `database.synchronous = "normal"`, to show what the flush before each 200 costs.
//! - `triage`: the same load (100 events, concurrency 1) into 50 and 10,000 group rooms
//!   the persona *is* in (no one addresses it), so every event goes through a worker, and
//!   into 10,000 rooms it is not in.
//! - `backlog`: a DM question asked right after 20,000 events in 10,000 other rooms,
//!   against the same question without them.
//! - `roundtrips`: one DM turn's database statements and WAL flushes, counted and listed.
//! - `turns`: 1,000 DMs ask, the LLM answering each after 1 s: one question every 5 ms
//!   (about 200 turns in flight), then all at once: time to each answer, and richbot's own
//!   time on both sides of the LLM call (the turn's overhead: committed question to PUT,
//!   less the LLM's time), and the CPU time richbot spent per turn (beside this
//!   process's own: the load and the stand-ins share the machine).
//! - `memory`: 10,000 group rooms with 20 messages of history each: resident memory.
//! - `crypto`: what end-to-end encryption adds, in this process over richbot's crypto
//!   store: an answer in a 2-member and a 100-member room (the first: devices queried,
//!   Olm sessions opened, the room key shared; the next: encrypt), decrypting a message,
//!   and the door's crypto inbox row beside a transaction.
//! - `postgres` (only when named: it starts a PostgreSQL server, `scripts/start-postgres.sh`,
//!   fsync on): the `ingest` loads and the 50-room `triage` load on SQLite and on
//!   PostgreSQL, side by side.
//! - `layouts` (only when named; `--prefill N`: N events in the table first): the
//!   inbox's storage alone, no HTTP edge or door: the same 100-event transactions
//!   committed by richbot's store, into its events table with SQLite's own settings, into
//!   that table without the `event_id` index, and into a journal row per transaction
//!   indexed in batches (`layouts.rs`).
//! - `synapse` (only when named: it installs Synapse from PyPI, as the tests do, and starts
//!   it): richbot beside a bot that does nothing (`trivial`), both on one real Synapse, 16
//!   people in a DM with each asking (`--repeats` rounds one at a time, then all at once),
//!   the answer's time measured as a client sees it, through `/sync`. `synapse-plain`:
//!   the same with richbot's `[encryption]` off, to show what following devices and keys
//!   costs.
//!
//! Figures are medians of `--repeats` runs (3) where repeated; the machine is shared, so
//! compare ratios measured in one run. `BENCH_RICHBOT=<path>` runs another build of
//! `richbot` instead (two builds compared side by side: alternate them in one session).

mod crypto;
mod floor;
mod layouts;
mod load;
mod roundtrips;
mod server;
mod stand_in;
mod synapse;
mod trivial;
mod turns;

use std::time::Duration;

use load::{ms, pct};
use server::Server;
use stand_in::Shared;

pub struct Opts {
    secs: f64,
    repeats: usize,
    /// `layouts`: events in the table before the timed ones.
    prefill: usize,
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse::<f64>().ok());
    let opts = Opts {
        secs: flag("--secs").unwrap_or(8.0),
        repeats: flag("--repeats").unwrap_or(3.0) as usize,
        prefill: flag("--prefill").unwrap_or(0.0) as usize,
    };
    let named: Vec<&str> =
        args.iter().map(String::as_str).filter(|a| !a.starts_with("--") && a.parse::<f64>().is_err()).collect();
    let pick = |s: &str| named.is_empty() || named.contains(&s);
    if pick("ingest") {
        ingest(&opts).await;
    }
    if pick("triage") {
        triage(&opts).await;
    }
    if pick("backlog") {
        turns::backlog().await;
    }
    if pick("roundtrips") {
        roundtrips::one_turn().await;
    }
    if pick("turns") {
        turns::dms(1000, Duration::from_secs(1), Some(Duration::from_millis(5))).await;
        turns::dms(1000, Duration::from_secs(1), None).await;
    }
    if pick("memory") {
        turns::memory(10_000, 20).await;
    }
    if pick("crypto") {
        crypto::costs(opts.repeats).await;
    }
    if named.contains(&"postgres") {
        postgres(&opts).await;
    }
    if named.contains(&"layouts") {
        layouts::compare(opts.repeats, opts.prefill).await;
    }
    if named.contains(&"synapse") {
        synapse::compare(16, opts.repeats.max(1), true).await;
    }
    if named.contains(&"synapse-plain") {
        synapse::compare(16, opts.repeats.max(1), false).await;
    }
}

/// A server with fresh stand-ins (the LLM answering after `delay`).
pub async fn fresh(delay: Duration) -> (Server, Shared) {
    fresh_with(delay, false, None).await
}

/// Like [`fresh`]; `normal`: `database.synchronous = "normal"` (no flush before the 200);
/// `postgres`: on a new database of that PostgreSQL server instead of SQLite.
pub async fn fresh_with(delay: Duration, normal: bool, postgres: Option<&str>) -> (Server, Shared) {
    let log = Shared::default();
    let hs = stand_in::homeserver(log.clone()).await;
    let llm = stand_in::llm(log.clone(), delay).await;
    (Server::start(&hs, &llm, normal, postgres).await, log)
}

/// Rooms `!<prefix><n>:localhost`, n < count.
pub fn rooms(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|n| format!("!{prefix}{n}:localhost")).collect()
}

/// Makes the persona (and alice and bob) members of `rooms`: group rooms it is in.
pub async fn join_groups(server: &Server, rooms: &[String]) {
    let http = reqwest::Client::new();
    let mut events = Vec::new();
    for (i, room) in rooms.iter().enumerate() {
        for who in ["@richbot:localhost", "@alice:localhost", "@bob:localhost"] {
            events.push(load::join(&format!("$j{i}{}", &who[1..4]), room, who));
        }
    }
    for (n, chunk) in events.chunks(100).enumerate() {
        load::put(&http, &server.url, &format!("join{n}"), chunk).await;
    }
    server.drained(Duration::from_secs(600)).await.expect("joins handled");
}

const HEADER: &str = "| load | events/s | txn/s | p50 ack ms | p99 ack ms | CPU µs/event | peak RSS MiB | handled after load ms |\n|---|---|---|---|---|---|---|---|";

/// What one load run is: events per transaction, concurrency, whether the persona is in
/// the rooms, whether `database.synchronous = "normal"`, on which PostgreSQL server (if
/// not SQLite).
#[derive(Clone, Copy)]
struct Case {
    per_txn: usize,
    conc: usize,
    joined: bool,
    normal: bool,
    postgres: Option<&'static str>,
}

/// One measured load: events/s, p99 ack, CPU µs per event, and its table row.
struct Run {
    rate: f64,
    p99_ms: f64,
    cpu_us: f64,
    row: String,
}

/// One measured load on a fresh server (joining the rooms first, off the clock).
async fn one(case: Case, rooms: &[String], secs: f64) -> Run {
    let Case { per_txn, conc, joined, normal, postgres } = case;
    let (server, _log) = fresh_with(Duration::ZERO, normal, postgres).await;
    if joined {
        join_groups(&server, rooms).await;
    }
    let cpu0 = server.cpu();
    let mut f = load::run(&server.url, per_txn, conc, rooms, secs).await;
    let drain = server.drained(Duration::from_secs(600)).await;
    let cpu = server.cpu() - cpu0;
    let rate = f.events as f64 / f.elapsed.as_secs_f64();
    let (p99_ms, cpu_us) = (ms(pct(&mut f.acks, 99.0)), cpu.as_secs_f64() * 1e6 / f.events as f64);
    let row = format!(
        "| {per_txn} ev × {conc} conc, {} rooms{}{}{} | {rate:.0} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} | {} |",
        rooms.len(),
        if joined { " (persona in them)" } else { "" },
        if normal { ", synchronous = normal" } else { "" },
        if postgres.is_some() { ", PostgreSQL" } else { "" },
        f.acks.len() as f64 / f.elapsed.as_secs_f64(),
        ms(pct(&mut f.acks, 50.0)),
        p99_ms,
        cpu_us,
        server.rss_mib().0,
        drain.map_or("not within 600 s".to_owned(), |d| format!("{:.0}", ms(d))),
    );
    Run { rate, p99_ms, cpu_us, row }
}

/// The median (by events/s) of `repeats` runs.
async fn median(opts: &Opts, case: Case, rooms: &[String]) -> Run {
    let mut runs = Vec::new();
    for _ in 0..opts.repeats.max(1) {
        runs.push(one(case, rooms, opts.secs).await);
    }
    runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    runs.swap_remove(runs.len() / 2)
}

async fn ingest(opts: &Opts) {
    let floor = floor::measure().await;
    println!("\n## ingest ({} s per run, median of {})\n\n{}\n{HEADER}", opts.secs, opts.repeats, floor.table());
    let fifty = rooms("r", 50);
    let mut first = None;
    for (per_txn, conc, normal) in [(100, 1, false), (1, 1, false), (100, 4, false), (100, 1, true), (1, 1, true)] {
        let run = median(opts, Case { per_txn, conc, joined: false, normal, postgres: None }, &fifty).await;
        println!("{}", run.row);
        first.get_or_insert((run.p99_ms, run.cpu_us));
    }
    if let Some((p99, cpu)) = first {
        println!(
            "\n100 × 1 (synchronous = full): CPU {cpu:.1} µs/event (goal ≤ 10) = {:.1} × SQLite's own CPU per row of \
             the floor's 100-row commits; p99 ack {p99:.2} ms (goal ≤ 5) = {:.1} × this machine's p99 commit of 100 \
             rows, {:.1} × its p99 fdatasync",
            cpu / floor.cpu_per_row_us,
            p99 / floor.commit100.1,
            p99 / floor.fsync.1,
        );
    }
}

async fn triage(opts: &Opts) {
    println!("\n## triage ({} s per run, median of {})\n\n{HEADER}", opts.secs, opts.repeats);
    for (count, joined) in [(50, true), (10_000, true), (10_000, false)] {
        let case = Case { per_txn: 100, conc: 1, joined, normal: false, postgres: None };
        println!("{}", median(opts, case, &rooms("g", count)).await.row);
    }
}

async fn postgres(opts: &Opts) {
    let server: &'static str = Box::leak(server::start_postgres().into_boxed_str());
    println!("\n## SQLite and PostgreSQL ({} s per run, median of {})\n\n{HEADER}", opts.secs, opts.repeats);
    let (fifty, groups) = (rooms("r", 50), rooms("g", 50));
    for (per_txn, conc, joined) in [(100, 1, false), (1, 1, false), (100, 4, false), (100, 1, true)] {
        for postgres in [None, Some(server)] {
            let case = Case { per_txn, conc, joined, normal: false, postgres };
            println!("{}", median(opts, case, if joined { &groups } else { &fifty }).await.row);
        }
    }
}
