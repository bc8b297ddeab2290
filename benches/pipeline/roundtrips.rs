//! What one DM turn asks of the database: every statement richbot runs (sqlx logs each
//! at `debug` under `sqlx::query`) and every WAL flush (`richbot::store::engine::durable` logs
//! each), from the question's transaction to the turn's end, in order, read from the
//! log of a real `richbot serve`. The LLM answers at once, streamed as the stand-in does.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::server::Server;
use crate::stand_in;

const FILTER: &str = "error,sqlx::query=debug,richbot::store::engine::durable=debug";

pub async fn one_turn() {
    println!("\n## one DM turn's database work (question committed -> turn finished)\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let log_path = dir.path().join("richbot.log");
    let log = stand_in::Shared::default();
    let hs = stand_in::homeserver(log.clone()).await;
    let llm = stand_in::llm(log.clone(), Duration::ZERO).await;
    let server = Server::start_logged(&hs, &llm, &log_path, FILTER).await;
    crate::turns::open_dms(&server, 0..2).await;
    // The first question warms what is read once (the persona's rooms, members).
    crate::turns::ask_one(&server, &log, 0).await;
    settled(&log_path).await;
    let before = lines(&log_path).len();
    crate::turns::ask_one(&server, &log, 1).await;
    settled(&log_path).await;
    let all = lines(&log_path);
    let turn: Vec<String> = all[before..].iter().filter_map(|l| kind(l)).collect();
    let flushes = turn.iter().filter(|k| k.as_str() == "WAL flush").count();
    let writes = turn.iter().filter(|k| is_write(k)).count();
    let reads = turn.len() - flushes - writes;
    println!("| statements | of which write | read | WAL flushes |\n|---|---|---|---|");
    println!("| {} | {writes} | {reads} | {flushes} |\n", turn.len() - flushes);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for k in &turn {
        *counts.entry(k.as_str()).or_default() += 1;
    }
    println!("in order: {}\n", turn.join(" → "));
    println!("| statement | times |\n|---|---|");
    for (k, n) in counts {
        println!("| {k} | {n} |");
    }
}

/// Waits until the turn's work stops appearing in the log (its last writes land after
/// its answer); the checkpointer's lines, which never stop, do not count.
async fn settled(path: &Path) {
    let (mut seen, mut since) = (0, Instant::now());
    while since.elapsed() < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = lines(path).iter().filter(|l| kind(l).is_some()).count();
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).expect("log").lines().map(str::to_owned).collect()
}

/// A log line as what it did: `WAL flush`, or the statement's verb and table (the
/// checkpointer's `PRAGMA`s are not the turn's, and are left out).
fn kind(line: &str) -> Option<String> {
    if line.contains("WAL flushed") {
        return Some("WAL flush".to_owned());
    }
    // sqlx writes the statement's text escaped: its line breaks are `\n`.
    let rest = line[line.find("summary=\"")? + "summary=\"".len()..].replace("\\n", " ");
    let verb = rest.split_whitespace().next()?.trim_matches('"').to_ascii_uppercase();
    if verb == "PRAGMA" {
        return None;
    }
    let words: Vec<&str> = rest.split(|c: char| c.is_whitespace() || c == '(' || c == ',' || c == '"').collect();
    let after = |key: &str| {
        let i = words.iter().position(|w| w.eq_ignore_ascii_case(key))?;
        words[i + 1..].iter().find(|w| !w.is_empty()).copied()
    };
    let table = match verb.as_str() {
        "INSERT" => after("INTO"),
        "UPDATE" => after("UPDATE"),
        _ => after("FROM"),
    };
    Some(format!("{verb} {}", table.unwrap_or("")).trim_end().to_owned())
}

fn is_write(kind: &str) -> bool {
    ["INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT"].iter().any(|v| kind.starts_with(v))
}
