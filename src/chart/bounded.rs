//! Drawing under a process-wide bound. Drawing is CPU work on a blocking thread, which
//! cannot be cancelled once it runs: a drawing that never ended (a range plotters could
//! not step through, before `draw` refused those) pinned a core for good and kept the
//! runtime from shutting down. So, whatever a chart holds:
//!
//! - at most [`AT_ONCE`] charts are drawn at a time in the whole process, so charts can
//!   never take every core from the turns and the homeserver edge;
//! - a drawing (with its wait for a turn to draw) that takes longer than [`TIME_LIMIT`] is
//!   given up, and its chart is left to its numbers. A drawing still running keeps its
//!   permit until it ends, so a runaway drawing holds one slot, never more.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{Chart, Png, draw};

/// Charts drawn at once in the process, at most.
pub const AT_ONCE: usize = 2;

/// How long a chart may take to be drawn, its wait for a slot included. A chart at the
/// catalogue's largest (8 series of 500 points) takes about 0.2 s on one core.
pub const TIME_LIMIT: Duration = Duration::from_secs(10);

static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(AT_ONCE));

/// `chart` drawn off the async threads, within the process's bound and [`TIME_LIMIT`].
pub async fn draw_bounded(chart: Chart) -> Result<Png, String> {
    draw_within(chart, TIME_LIMIT, draw).await
}

/// `chart` drawn by `painter` within the bound and `limit` (parameters for the tests).
async fn draw_within(
    chart: Chart,
    limit: Duration,
    painter: impl FnOnce(&Chart) -> Result<Png, String> + Send + 'static,
) -> Result<Png, String> {
    let drawn = async {
        let permit = SLOTS.acquire().await.map_err(|_| "charts are no longer drawn".to_owned())?;
        // The permit goes with the thread: released when the drawing ends, however late.
        tokio::task::spawn_blocking(move || {
            let _slot = permit;
            painter(&chart)
        })
        .await
        .map_err(|e| format!("the chart's drawing failed: {e}"))?
    };
    match tokio::time::timeout(limit, drawn).await {
        Ok(done) => done,
        Err(_) => Err(format!("the chart was not drawn within {} s", limit.as_secs_f64())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Kind, Series};

    fn chart() -> Chart {
        let series = vec![Series { name: "a".into(), values: vec![1.0, 2.0] }];
        Chart { kind: Kind::Line, title: None, unit: None, labels: Vec::new(), series }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drawing_past_its_limit_is_given_up_and_holds_its_slot_until_it_ends() {
        let limit = Duration::from_millis(200);
        let mut release = Vec::new();
        for _ in 0..AT_ONCE {
            // A drawing that runs until the test lets it end.
            let (end, ended) = std::sync::mpsc::channel::<()>();
            release.push(end);
            let runaway = move |_: &Chart| {
                let _ = ended.recv();
                Err("ended".to_owned())
            };
            let given_up = draw_within(chart(), limit, runaway).await.expect_err("given up");
            assert!(given_up.contains("not drawn within 0.2 s"), "{given_up}");
        }
        assert_eq!(SLOTS.available_permits(), 0, "both runaway drawings still hold their slots");
        let waited = draw_within(chart(), limit, draw).await.expect_err("no slot within the limit");
        assert!(waited.contains("not drawn within"), "{waited}");
        // When the runaway drawings end, their slots come back and charts are drawn again.
        drop(release);
        let drawn = draw_within(chart(), Duration::from_secs(60), draw).await.expect("drawn once a slot is free");
        assert!(drawn.bytes.starts_with(b"\x89PNG"));
    }
}
