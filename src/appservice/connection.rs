//! One HTTP/1.1 connection of the edge: its requests served in turn, each head within
//! [`HEADER_READ`], closed after [`IDLE`] with nothing in flight or when evicted, and its
//! activity (bytes moved, requests in flight) kept where the accept loop can see it.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A request's head (request line and headers) must arrive within this.
pub const HEADER_READ: Duration = Duration::from_secs(10);
/// A kept-alive connection with nothing in flight is closed after this.
pub const IDLE: Duration = Duration::from_secs(150);

/// When a connection opened and last moved bytes (ms after), its requests in flight, and
/// the signal that evicts it.
pub(super) struct Activity {
    pub opened: Instant,
    pub last: AtomicU64,
    pub in_flight: AtomicUsize,
    pub evicted: AtomicBool,
    pub close: tokio::sync::Notify,
}

impl Activity {
    pub fn new() -> Self {
        Self {
            opened: Instant::now(),
            last: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            evicted: AtomicBool::new(false),
            close: tokio::sync::Notify::new(),
        }
    }
}

/// Serves one connection until the client closes it, it idles past [`IDLE`], it is
/// evicted (with nothing in flight), or `closed` says richbot stops (gracefully).
pub(super) async fn connection(
    stream: TcpStream,
    app: Router,
    mut closed: watch::Receiver<bool>,
    activity: Arc<Activity>,
) {
    let opened = activity.opened;
    let io = TokioIo::new(Tracked { inner: stream, activity: activity.clone(), opened });
    let service = Counted { inner: TowerToHyperService::new(app), activity: activity.clone() };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ).keep_alive(true);
    let mut conn = pin!(builder.serve_connection(io, service));
    let mut closing = false;
    loop {
        let last = Duration::from_millis(activity.last.load(Ordering::Relaxed));
        let idle_until = tokio::time::Instant::from_std(opened + last + IDLE);
        tokio::select! {
            _ = conn.as_mut() => return,
            changed = closed.changed(), if !closing => {
                closing = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = activity.close.notified(), if !closing => {
                if activity.in_flight.load(Ordering::Acquire) == 0 {
                    return;
                }
                activity.evicted.store(false, Ordering::Release);
            }
            () = tokio::time::sleep_until(idle_until) => {
                let moved = Duration::from_millis(activity.last.load(Ordering::Relaxed)) > last;
                if !moved && activity.in_flight.load(Ordering::Acquire) == 0 {
                    return;
                }
            }
        }
    }
}

/// The app's service, counting the connection's requests in flight.
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for Counted<S>
where
    S: hyper::service::Service<hyper::Request<Incoming>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        let done = InFlight(self.activity.clone());
        let answer = self.inner.call(req);
        Box::pin(async move {
            let r = answer.await;
            drop(done);
            r
        })
    }
}

/// Ends a request's count when its answer is ready (or it is dropped).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket that notes when it last moved bytes.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
    opened: Instant,
}

impl Tracked {
    fn moved(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.last.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        r
    }

    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
