//! The scenarios with turns (a DM question answered through the scripted LLM) and the
//! memory one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::load::{self, ms, pct};
use crate::server::Server;
use crate::stand_in::Shared;
use crate::{fresh, join_groups, rooms};

/// DM rooms `!q<n>:localhost` between the persona and `@user<n>:localhost`, for n in `ns`.
pub async fn open_dms(server: &Server, ns: std::ops::Range<u64>) {
    let http = reqwest::Client::new();
    let mut events = Vec::new();
    for n in ns {
        let room = format!("!q{n}:localhost");
        events.push(load::join(&format!("$dmp{n}"), &room, "@richbot:localhost"));
        events.push(load::join(&format!("$dmu{n}"), &room, &format!("@user{n}:localhost")));
    }
    for (i, chunk) in events.chunks(100).enumerate() {
        load::put(&http, &server.url, &format!("dm{i}"), chunk).await;
    }
    server.drained(Duration::from_secs(300)).await.expect("DMs opened");
}

/// Question `n` in its DM, as an event.
fn question(n: u64) -> Value {
    let mut e =
        load::message(&format!("$q{n}"), &format!("!q{n}:localhost"), n, &format!("q-{n} what is the weather?"));
    e["sender"] = Value::String(format!("@user{n}:localhost"));
    e
}

/// Waits until the answers to `ns` were posted (or `limit`).
async fn answered(log: &Shared, ns: &[u64], limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        if ns.iter().all(|n| log.lock().expect("log").posted.contains_key(n)) {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Asks question `n` (one transaction) and returns the time to its answer.
pub async fn ask_one(server: &Server, log: &Shared, n: u64) -> Duration {
    let http = reqwest::Client::new();
    let sent = Instant::now();
    load::put(&http, &server.url, &format!("ask{n}"), &[question(n)]).await;
    assert!(answered(log, &[n], Duration::from_secs(120)).await, "question {n} answered");
    log.lock().expect("log").posted[&n] - sent
}

pub async fn backlog() {
    println!("\n## a DM question after a backlog\n\n| case | answered after ms |\n|---|---|");
    let (server, log) = fresh(Duration::ZERO).await;
    open_dms(&server, 1..3).await;
    let quiet = ask_one(&server, &log, 1).await;
    println!("| no backlog | {:.1} |", ms(quiet));
    let http = reqwest::Client::new();
    let others = rooms("busy", 10_000);
    for t in 0..200u64 {
        let events: Vec<Value> = (0..100u64)
            .map(|i| {
                let n = t * 100 + i;
                load::message(&format!("$busy{n}"), &others[(n % 10_000) as usize], n, "chatter elsewhere")
            })
            .collect();
        load::put(&http, &server.url, &format!("busy{t}"), &events).await;
    }
    let after = ask_one(&server, &log, 2).await;
    println!("| right after 20,000 events in 10,000 rooms the persona is not in | {:.1} |", ms(after));
}

/// `count` DMs each ask once, the LLM answering each after `delay`: all at once (`pace`
/// None: transactions of 100 questions back to back), or one question every `pace`.
pub async fn dms(count: u64, delay: Duration, pace: Option<Duration>) {
    match pace {
        None => println!("\n## {count} DMs ask at once, the LLM answering each after {} ms\n", delay.as_millis()),
        Some(p) => println!(
            "\n## {count} DMs ask one after another, one every {} ms, the LLM answering each after {} ms\n",
            p.as_millis(),
            delay.as_millis()
        ),
    }
    let (server, log) = fresh(delay).await;
    open_dms(&server, 0..count).await;
    let http = reqwest::Client::new();
    let ns: Vec<u64> = (0..count).collect();
    let (mut sent, mut acked): (HashMap<u64, Instant>, HashMap<u64, Instant>) = Default::default();
    // As a homeserver sends them: transactions of up to 100 events, one after another.
    let per_txn = if pace.is_some() { 1 } else { 100 };
    let (cpu0, own0) = (server.cpu(), crate::server::cpu_of(std::process::id()));
    let start = Instant::now();
    for (i, chunk) in ns.chunks(per_txn).enumerate() {
        if let Some(p) = pace {
            tokio::time::sleep_until((start + p * i as u32).into()).await;
        }
        let now = Instant::now();
        sent.extend(chunk.iter().map(|n| (*n, now)));
        let events: Vec<Value> = chunk.iter().map(|n| question(*n)).collect();
        let ack = load::put(&http, &server.url, &format!("burst{i}"), &events).await;
        acked.extend(chunk.iter().map(|n| (*n, ack)));
    }
    let all = answered(&log, &ns, Duration::from_secs(120)).await;
    let (cpu, own) = (server.cpu() - cpu0, crate::server::cpu_of(std::process::id()) - own0);
    let log = log.lock().expect("log");
    let series = |f: &dyn Fn(u64) -> Option<Duration>| -> Vec<Duration> { ns.iter().filter_map(|n| f(*n)).collect() };
    let mut answer = series(&|n| Some(*log.posted.get(&n)? - sent[&n]));
    let mut before = series(&|n| Some(*log.asked.get(&n)? - sent[&n]));
    let mut before_ack = series(&|n| Some(log.asked.get(&n)?.saturating_duration_since(acked[&n])));
    let mut after = series(&|n| log.posted.get(&n)?.checked_duration_since(*log.answered.get(&n)?));
    let mut overhead = series(&|n| {
        let before = log.asked.get(&n)?.saturating_duration_since(acked[&n]);
        Some(before + log.posted.get(&n)?.checked_duration_since(*log.answered.get(&n)?)?)
    });
    println!("| measure | n | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|");
    for (name, v) in [
        ("question sent -> answer posted", &mut answer),
        ("question sent -> LLM request arrives (richbot's cost before the LLM, ingest included)", &mut before),
        ("question's 200 (committed) -> LLM request arrives", &mut before_ack),
        ("LLM answer leaves -> answer PUT arrives (richbot's cost after the LLM)", &mut after),
        ("turn overhead: the two above, committed question -> PUT less the LLM's time", &mut overhead),
    ] {
        let max = v.iter().max().copied().unwrap_or_default();
        println!("| {name} | {} | {:.1} | {:.1} | {:.1} |", v.len(), ms(pct(v, 50.0)), ms(pct(v, 99.0)), ms(max));
    }
    println!(
        "\nall {count} answered: {all}; richbot's CPU {:.2} ms per turn (this process's, the stand-ins and the \
         load: {:.2} ms); peak RSS {:.1} MiB",
        ms(cpu) / count as f64,
        ms(own) / count as f64,
        server.rss_mib().0
    );
}

pub async fn memory(count: usize, history: u64) {
    println!("\n## memory: {count} group rooms the persona is in, {history} messages each\n");
    let (server, _log) = fresh(Duration::ZERO).await;
    let groups = rooms("m", count);
    join_groups(&server, &groups).await;
    let http = reqwest::Client::new();
    let total = count as u64 * history;
    let start = Instant::now();
    let mut batch = Vec::with_capacity(100);
    for n in 0..total {
        let room = &groups[(n % count as u64) as usize];
        batch.push(load::message(
            &format!("$h{n}"),
            room,
            n,
            &format!("a line of history, number {n}, in a busy room"),
        ));
        if batch.len() == 100 {
            load::put(&http, &server.url, &format!("h{n}"), &batch).await;
            batch.clear();
        }
    }
    let drained = server.drained(Duration::from_secs(900)).await;
    let (peak, now) = server.rss_mib();
    println!(
        "| rooms | events | ingest + triage s | peak RSS MiB | RSS after MiB |\n|---|---|---|---|---|\n| {count} | {} | {:.1}{} | {peak:.1} | {now:.1} |",
        total + count as u64 * 3,
        start.elapsed().as_secs_f64(),
        if drained.is_some() { "" } else { " (not drained)" },
    );
}
