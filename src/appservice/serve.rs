//! Serving the edge: HTTP/1.1 connections accepted here rather than by `axum::serve`, so
//! that no one can hold richbot's file descriptors for free, without the homeserver
//! token: a request's head must arrive within `HEADER_READ`, a kept-alive connection
//! with no request in flight is closed after `IDLE` (`connection.rs`), and at most `max_connections`
//! are open at once. At the cap, a new connection takes the place of the one idle the
//! longest (none in flight: a half-sent head counts as idle); when every one is busy, the
//! new one is closed at once, never queued. So a flood of idle or half-sent requests
//! costs its sender sockets and richbot nothing lasting, the homeserver's next
//! connection still gets in, and the descriptors richbot needs for the homeserver, the
//! database and the model stay free. `IDLE` is longer than Synapse keeps an idle
//! connection (2 minutes), so it is Synapse that closes its own, never richbot under it.
//!
//! Lifecycle of a connection: accepted (a slot taken) -> requests served in turn, each
//! head within its deadline -> closed by the client, by idleness, or gracefully at
//! shutdown (the request in flight finishes first) -> its slot is free.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::connection::{Activity, connection};

/// How long a connection at the cap waits for the one it evicts to close.
const EVICTION_WAIT: Duration = Duration::from_millis(200);
/// Open connections at most unless configured (`appservice.max_connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Serves `app` on `listener` until `shutdown`, then lets the requests in flight finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let (closing, closed) = watch::channel(false);
    let open: Open = Arc::default();
    let mut connections = tokio::task::JoinSet::new();
    let mut refused = Refusals::default();
    let mut shutdown = pin!(shutdown);
    let mut next_id = 0u64;
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors (or a connection reset before it was taken): wait a
                // moment rather than spin; the idle ones are being closed meanwhile.
                Err(e) => {
                    refused.accept_failed(&e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                evict_idlest(&open);
                match tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned()).await {
                    Ok(Ok(slot)) => slot,
                    _ => {
                        refused.over_cap(max_connections);
                        drop(stream);
                        continue;
                    }
                }
            }
        };
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let activity = Arc::new(Activity::new());
        lock(&open).insert(next_id, activity.clone());
        let (app, closed, open, id) = (app.clone(), closed.clone(), open.clone(), next_id);
        connections.spawn(async move {
            connection(stream, app, closed, activity).await;
            lock(&open).remove(&id);
            drop(slot);
        });
        while connections.try_join_next().is_some() {}
    }
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// The open connections' activity, by number.
type Open = Arc<std::sync::Mutex<std::collections::HashMap<u64, Arc<Activity>>>>;

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Tells the connection idle the longest (nothing in flight) to close.
fn evict_idlest(open: &Open) {
    let open = lock(open);
    let idlest = open
        .values()
        .filter(|a| a.in_flight.load(Ordering::Acquire) == 0 && !a.evicted.load(Ordering::Acquire))
        .min_by_key(|a| a.opened + Duration::from_millis(a.last.load(Ordering::Relaxed)));
    if let Some(a) = idlest {
        a.evicted.store(true, Ordering::Release);
        a.close.notify_one();
    }
}

/// Says (at most once a minute) that connections were refused, and how many.
#[derive(Default)]
struct Refusals {
    since: u64,
    last: Option<Instant>,
}

impl Refusals {
    fn due(&mut self) -> Option<u64> {
        self.since += 1;
        if self.last.is_some_and(|t| t.elapsed() < Duration::from_secs(60)) {
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.since))
    }

    fn over_cap(&mut self, cap: usize) {
        if let Some(n) = self.due() {
            tracing::warn!(
                refused = n,
                cap,
                "connections over appservice.max_connections, all busy, were closed at once"
            );
        }
    }

    fn accept_failed(&mut self, e: &std::io::Error) {
        if let Some(n) = self.due() {
            tracing::warn!(error = %e, failures = n, "could not accept connections (out of file descriptors?)");
        }
    }
}

/// The open-file limit this process has (its soft `RLIMIT_NOFILE`), from `/proc`.
pub fn open_file_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The connection cap to use: as configured, but at most half the open-file limit, so the
/// other half is left for the homeserver, the database, the model and MCP servers.
pub fn connection_cap(configured: usize) -> usize {
    match open_file_limit() {
        Some(limit) if configured > limit / 2 => {
            tracing::warn!(
                configured,
                open_file_limit = limit,
                "appservice.max_connections is over half the open-file limit; using half (raise LimitNOFILE)"
            );
            (limit / 2).max(1)
        }
        _ => configured,
    }
}
