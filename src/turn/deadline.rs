//! The turn's deadline, which stops while the turn waits for a person: time spent waiting
//! for the asker's approval is theirs, not the turn's, so a slow "yes" does not make the
//! turn run out right after it.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Waits in progress, and the time all waits took before the current one began.
#[derive(Debug, Clone, Copy, Default)]
struct Paused {
    waits: usize,
    since: Option<Instant>,
    total: Duration,
}

/// A deadline that waits can stop.
#[derive(Debug)]
pub struct Deadline {
    paused: watch::Sender<Paused>,
}

impl Default for Deadline {
    fn default() -> Self {
        Self { paused: watch::channel(Paused::default()).0 }
    }
}

/// The deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl Deadline {
    /// Runs `work` until it ends or `limit` has passed, not counting paused time.
    pub async fn run<F: Future>(&self, limit: Duration, work: F) -> Result<F::Output, Elapsed> {
        let start = Instant::now();
        let mut changes = self.paused.subscribe();
        let before = changes.borrow().total;
        let expired = async move {
            loop {
                let p = *changes.borrow_and_update();
                if p.waits > 0 {
                    if changes.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                    continue;
                }
                let due = start + limit + p.total.saturating_sub(before);
                tokio::select! {
                    () = tokio::time::sleep_until(due) => return,
                    _ = changes.changed() => {}
                }
            }
        };
        tokio::select! {
            out = work => Ok(out),
            () = expired => Err(Elapsed),
        }
    }

    /// Runs `wait` with the deadline stopped.
    pub async fn paused<F: Future>(&self, wait: F) -> F::Output {
        self.paused.send_modify(|p| {
            if p.waits == 0 {
                p.since = Some(Instant::now());
            }
            p.waits += 1;
        });
        let _resume = Resume(self);
        wait.await
    }
}

/// Starts the clock again when the last wait ends (or is dropped).
struct Resume<'a>(&'a Deadline);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.paused.send_modify(|p| {
            p.waits -= 1;
            if p.waits == 0
                && let Some(since) = p.since.take()
            {
                p.total += since.elapsed();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_past_the_limit_is_stopped() {
        let d = Deadline::default();
        let r = d.run(Duration::from_secs(10), tokio::time::sleep(Duration::from_secs(11))).await;
        assert_eq!(r, Err(Elapsed));
        let r = d.run(Duration::from_secs(10), tokio::time::sleep(Duration::from_secs(9))).await;
        assert_eq!(r, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn time_spent_waiting_does_not_count() {
        let d = Deadline::default();
        let work = async {
            tokio::time::sleep(Duration::from_secs(6)).await;
            d.paused(tokio::time::sleep(Duration::from_secs(100))).await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            "done"
        };
        let started = Instant::now();
        assert_eq!(d.run(Duration::from_secs(10), work).await, Ok("done"));
        assert_eq!(started.elapsed(), Duration::from_secs(109));
        let work = async {
            d.paused(tokio::time::sleep(Duration::from_secs(100))).await;
            tokio::time::sleep(Duration::from_secs(11)).await;
        };
        let started = Instant::now();
        assert_eq!(d.run(Duration::from_secs(10), work).await, Err(Elapsed));
        assert_eq!(started.elapsed(), Duration::from_secs(110), "stopped 10 s after the wait, not at once");
    }
}
