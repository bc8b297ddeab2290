//! What the storage layout of the inbox costs, in SQLite alone: the question behind issue
//! 27's ingest goal (10 µs of CPU per event), which richbot's figures are far from on the
//! VMs this project runs on, with SQLite's own work most of it.
//!
//! The same 100-event transactions (`load::message`, random event ids, 50 rooms) are
//! committed durably four ways, each in a new database, rounds alternating so that the
//! machine's mood falls on all four alike:
//! - `richbot's store`: `Store::insert_events` and `Store::sync`, as the door calls them,
//!   on a store opened as `richbot serve` opens it (`synchronous = NORMAL` and a flush of
//!   the WAL per transaction, checkpoints beside the writer), so that the layouts'
//!   figures can be set beside richbot's;
//! - the other three `synchronous = FULL`, with SQLite's own checkpoints:
//!   - `events table`: richbot's (`migrations/sqlite/0001` and `0014`: a row per event, the
//!     unique `event_id` index, `(room_id, seq)`, the partial indexes), one multi-row
//!     `INSERT ... ON CONFLICT (event_id) DO NOTHING` per transaction, as `store::events`;
//!   - `no event_id index`: the same without the unique index, to show what it costs
//!     (and so what deduplicating by event id costs: without it there is none);
//!   - `journal`: each transaction one row of its body; every [`JOURNAL_BATCH`] events,
//!     the rows are read back, parsed and inserted into the events table in one
//!     transaction (`synchronous = NORMAL`, a 64 MiB page cache), the journal rows
//!     deleted. The ack is the journal commit; the batch's time is what an ack queued
//!     behind it would wait.
//!
//! CPU is this process's (SQLite's worker thread and the parsing), per event.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use sqlx::{Connection, SqliteConnection};

use crate::load::{event_id, message, ms, pct};

/// Transactions per run (100 events each).
const TXNS: usize = 1200;
/// Events the journal layout moves into the events table at once.
const JOURNAL_BATCH: usize = 10_000;

const EVENTS: &str = "CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL UNIQUE, room_id TEXT NOT NULL,
    sender TEXT NOT NULL, event_type TEXT NOT NULL, state_key TEXT, origin_ts INTEGER NOT NULL,
    event TEXT NOT NULL, received_at INTEGER NOT NULL, processed INTEGER NOT NULL DEFAULT 0, turn_id INTEGER);
    CREATE INDEX events_room ON events (room_id, seq);
    CREATE INDEX events_pending ON events (room_id, seq) WHERE processed = 0;
    CREATE INDEX events_turn ON events (turn_id) WHERE turn_id IS NOT NULL;
    CREATE TABLE journal (id INTEGER PRIMARY KEY, body TEXT NOT NULL);";

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Store,
    Events,
    NoEventIdIndex,
    Journal,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Self::Store => "richbot's store (insert_events + sync)",
            Self::Events => "events table (richbot's), SQLite's own settings",
            Self::NoEventIdIndex => "events table without the event_id index",
            Self::Journal => "journal row per transaction, indexed 10,000 at a time",
        }
    }
}

/// One run's figures.
struct Run {
    cpu_us: f64,
    p50: f64,
    p99: f64,
    /// The journal's indexing batches: median and longest, ms.
    batch: Option<(f64, f64)>,
}

impl Run {
    /// The figures of a run that started at this process's CPU time `cpu0`.
    fn of(cpu0: Duration, mut acks: Vec<Duration>, mut batches: Vec<Duration>) -> Self {
        let cpu = crate::server::cpu_of(std::process::id()) - cpu0;
        let cpu_us = cpu.as_secs_f64() * 1e6 / (TXNS * 100) as f64;
        let batch = (!batches.is_empty()).then(|| (ms(pct(&mut batches, 50.0)), ms(pct(&mut batches, 100.0))));
        Self { cpu_us, p50: ms(pct(&mut acks, 50.0)), p99: ms(pct(&mut acks, 99.0)), batch }
    }
}

/// The fields of an event the events table needs, borrowed from the journal's text.
#[derive(Deserialize)]
struct Head<'a> {
    event_id: &'a str,
    room_id: &'a str,
    sender: &'a str,
    #[serde(rename = "type")]
    event_type: &'a str,
    origin_server_ts: i64,
}

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    events: Vec<&'a RawValue>,
}

/// `prefill`: events already in the table when the timing starts (a deployment keeps
/// `bot.history_days` of them), written off the clock.
pub async fn compare(repeats: usize, prefill: usize) {
    let rooms = crate::rooms("r", 50);
    let layouts = [Layout::Store, Layout::Events, Layout::NoEventIdIndex, Layout::Journal];
    let mut runs: Vec<Vec<Run>> = layouts.iter().map(|_| Vec::new()).collect();
    for _ in 0..repeats.max(1) {
        for (i, layout) in layouts.iter().enumerate() {
            runs[i].push(one(*layout, &rooms, prefill).await);
        }
    }
    println!(
        "\n## storage layouts in SQLite alone ({TXNS} transactions of 100 events into a table of {prefill} events, \
         each durable before the next, median of {})\n",
        repeats.max(1)
    );
    println!(
        "| layout | CPU µs/event | p50 ack ms | p99 ack ms | indexing batch p50 / max ms |\n|---|---|---|---|---|"
    );
    for (layout, mut runs) in layouts.iter().zip(runs) {
        runs.sort_by(|a, b| a.cpu_us.total_cmp(&b.cpu_us));
        let mid = runs.swap_remove(runs.len() / 2);
        let batch = mid.batch.map_or("–".to_owned(), |(p50, max)| format!("{p50:.0} / {max:.0}"));
        println!("| {} | {:.1} | {:.2} | {:.2} | {batch} |", layout.name(), mid.cpu_us, mid.p50, mid.p99);
    }
}

async fn one(layout: Layout, rooms: &[String], prefill: usize) -> Run {
    if layout == Layout::Store {
        return store(rooms, prefill).await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = crate::floor::open_full(&dir.path().join("layout.db")).await;
    let schema = match layout {
        Layout::NoEventIdIndex => EVENTS.replace("event_id TEXT NOT NULL UNIQUE", "event_id TEXT NOT NULL"),
        _ => EVENTS.to_owned(),
    };
    sqlx::raw_sql(&schema).execute(&mut db).await.expect("schema");
    if layout == Layout::Journal {
        sqlx::query("PRAGMA cache_size = -65536").execute(&mut db).await.expect("cache");
    }
    let insert = insert_sql(layout != Layout::NoEventIdIndex);
    fill(&mut db, &insert, rooms, prefill).await;
    let bodies: Vec<String> = (0..TXNS).map(|t| body(rooms, t)).collect();
    let (mut acks, mut batches) = (Vec::with_capacity(TXNS), Vec::new());
    let cpu0 = crate::server::cpu_of(std::process::id());
    for (t, body) in bodies.iter().enumerate() {
        let start = Instant::now();
        if layout == Layout::Journal {
            sqlx::query("INSERT INTO journal (body) VALUES (?)").bind(body).execute(&mut db).await.expect("journal");
            acks.push(start.elapsed());
            if (t + 1) * 100 % JOURNAL_BATCH == 0 {
                let start = Instant::now();
                index_journal(&mut db, &insert).await;
                batches.push(start.elapsed());
            }
        } else {
            let mut tx = db.begin().await.expect("begin");
            insert_body(&mut tx, &insert, body).await;
            tx.commit().await.expect("commit");
            acks.push(start.elapsed());
        }
    }
    Run::of(cpu0, acks, batches)
}

/// The [`Layout::Store`] run.
async fn store(rooms: &[String], prefill: usize) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("store.db").display());
    let store = richbot::store::Store::open(&url).await.expect("store");
    for batch in 0..prefill.div_ceil(JOURNAL_BATCH) {
        let events: Vec<_> = (0..JOURNAL_BATCH / 100).flat_map(|t| new_events(&body(rooms, batch * 100 + t))).collect();
        store.insert_events(&events, richbot::clock::now_ms()).await.expect("fill");
    }
    let bodies: Vec<String> = (0..TXNS).map(|t| body(rooms, t)).collect();
    let mut acks = Vec::with_capacity(TXNS);
    let cpu0 = crate::server::cpu_of(std::process::id());
    for body in &bodies {
        let start = Instant::now();
        store.insert_events(&new_events(body), richbot::clock::now_ms()).await.expect("insert");
        store.sync().await.expect("sync");
        acks.push(start.elapsed());
    }
    Run::of(cpu0, acks, Vec::new())
}

/// A body's events as the door stores them (settled: rooms no persona is in).
fn new_events(body: &str) -> Vec<richbot::store::NewEvent> {
    let parsed: Body<'_> = serde_json::from_str(body).expect("body");
    parsed
        .events
        .iter()
        .map(|raw| {
            let head: Head<'_> = serde_json::from_str(raw.get()).expect("event");
            richbot::store::NewEvent {
                event_id: head.event_id.try_into().expect("event id"),
                room_id: head.room_id.try_into().expect("room id"),
                sender: head.sender.try_into().expect("sender"),
                event_type: head.event_type.to_owned(),
                state_key: None,
                origin_ts: head.origin_server_ts,
                event: raw.get().to_owned(),
                processed: true,
            }
        })
        .collect()
}

/// Transaction `t`'s body: 100 messages over `rooms`.
fn body(rooms: &[String], t: usize) -> String {
    let events: Vec<_> = (0..100)
        .map(|i| {
            let n = (t * 100 + i) as u64;
            message(&event_id(), &rooms[n as usize % rooms.len()], n, &format!("hello all, message {n}"))
        })
        .collect();
    serde_json::json!({ "events": events }).to_string()
}

/// Writes `count` events into the table, 10,000 a commit, without flushing.
async fn fill(db: &mut SqliteConnection, insert: &str, rooms: &[String], count: usize) {
    sqlx::query("PRAGMA synchronous = OFF").execute(&mut *db).await.expect("off");
    for batch in 0..count.div_ceil(JOURNAL_BATCH) {
        let mut tx = db.begin().await.expect("begin");
        for t in 0..JOURNAL_BATCH / 100 {
            insert_body(&mut tx, insert, &body(rooms, batch * 100 + t)).await;
        }
        tx.commit().await.expect("commit");
    }
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut *db).await.expect("checkpoint");
    sqlx::query("PRAGMA synchronous = FULL").execute(&mut *db).await.expect("full");
}

/// Moves every journal row into the events table, in one transaction.
async fn index_journal(db: &mut SqliteConnection, insert: &str) {
    sqlx::query("PRAGMA synchronous = NORMAL").execute(&mut *db).await.expect("normal");
    let mut tx = db.begin().await.expect("begin");
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, body FROM journal ORDER BY id").fetch_all(&mut *tx).await.expect("journal rows");
    for (_, body) in &rows {
        insert_body(&mut tx, insert, body).await;
    }
    let last = rows.last().map_or(0, |r| r.0);
    sqlx::query("DELETE FROM journal WHERE id <= ?").bind(last).execute(&mut *tx).await.expect("delete");
    tx.commit().await.expect("commit");
    sqlx::query("PRAGMA synchronous = FULL").execute(&mut *db).await.expect("full");
}

/// One multi-row `INSERT` of a transaction body's events, as `store::events` binds them.
async fn insert_body(db: &mut SqliteConnection, insert: &str, body: &str) {
    let parsed: Body<'_> = serde_json::from_str(body).expect("body");
    let mut q = sqlx::query(insert);
    for raw in &parsed.events {
        let head: Head<'_> = serde_json::from_str(raw.get()).expect("event");
        q = q
            .bind(head.event_id)
            .bind(head.room_id)
            .bind(head.sender)
            .bind(head.event_type)
            .bind(None::<&str>)
            .bind(head.origin_server_ts)
            .bind(raw.get())
            .bind(richbot::clock::now_ms())
            .bind(1_i64);
    }
    q.execute(db).await.expect("insert");
}

/// The 100-row `INSERT`; `dedup`: skip an event id seen before.
fn insert_sql(dedup: bool) -> String {
    let rows = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; 100].join(", ");
    format!(
        "INSERT INTO events (event_id, room_id, sender, event_type, state_key, origin_ts, event, received_at, processed) \
         VALUES {rows}{}",
        if dedup { " ON CONFLICT (event_id) DO NOTHING" } else { "" }
    )
}
