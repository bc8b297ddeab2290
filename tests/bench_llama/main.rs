//! A benchmark, not a test: two questions in one DM, answered by a real model server
//! (llama.cpp's `llama-server` with Gemma 3 270M, as the test lane runs it) through a
//! real Synapse, and what the server did for each. For every model call it reads the
//! server's own log: the prompt's tokens, and how many of them it evaluated (the rest it
//! reused from its cache of the previous request). It reports, per sample, each turn's
//! latency (the question sent to the turn finished) and its calls' tokens, then the
//! medians: the second turn's evaluated share of its prompt, and its latency over the
//! first's.
//!
//! Run it with `cargo test --test bench_llama` (`BENCH_SAMPLES`, default 3: each
//! sample starts a fresh server, so the first question is cold). `cargo test` does not
//! build or run it (`test = false` in Cargo.toml).

#[allow(dead_code)]
#[path = "../it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::llama::{LlamaServer, MODEL};
use support::{Env, Options, eventually, room_id};

const FIRST: &str = "What's the weather in Paris?";
const SECOND: &str = "Show the weather in Rome as a rich message.";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let samples: usize = std::env::var("BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let (mut shares, mut ratios, mut firsts) = (Vec::new(), Vec::new(), Vec::new());
    for sample in 1..=samples {
        let llama = LlamaServer::start().await;
        let llm = Some((llama.base_url.clone(), MODEL.to_owned(), LlamaServer::llm_toml(true)));
        let env = Env::start_with(Options { llm, llm_timeout_secs: 300, ..Default::default() }).await;
        let room = env.dm().await;
        let store = env.store().await;
        let mut turns = Vec::new();
        let mut seen = 0;
        for (n, question) in [FIRST, SECOND].into_iter().enumerate() {
            let started = Instant::now();
            env.alice.say(&room, question).await;
            eventually("the turn", Duration::from_secs(600), || async {
                let t = store.turn_outcomes(&room_id(&room)).await.expect("turns");
                (t.len() > n).then_some(())
            })
            .await;
            let took = started.elapsed();
            let all = llama.calls();
            let mine = all[seen..].to_vec();
            seen = all.len();
            turns.push((took, mine));
        }
        for (n, (took, calls)) in turns.iter().enumerate() {
            let list: Vec<String> = calls.iter().map(|c| format!("{}/{}", c.evaluated, c.prompt)).collect();
            println!(
                "sample {sample} turn {}: {:.1} s, calls (evaluated/prompt tokens): {}",
                n + 1,
                took.as_secs_f64(),
                list.join(", ")
            );
        }
        let (first, second) = (&turns[0], &turns[1]);
        let (evaluated, prompt): (u64, u64) = second.1.iter().fold((0, 0), |(e, p), c| (e + c.evaluated, p + c.prompt));
        shares.push(evaluated as f64 / prompt.max(1) as f64);
        ratios.push(second.0.as_secs_f64() / first.0.as_secs_f64());
        firsts.push(first.1.first().map_or(0.0, |c| c.prompt as f64));
        drop(env);
        drop(llama);
    }
    println!(
        "median over {samples} sample(s): first question's prompt {:.0} tokens; second turn evaluated {:.1}% of its \
         prompt; second turn's latency {:.2}x the first's",
        median(firsts),
        median(shares) * 100.0,
        median(ratios)
    );
}
