//! How the `richbot` process runs, whatever its command: its allocator, its async
//! runtime and its logging. In the library, not in `main.rs`, so that the tests' and
//! benchmarks' builds run on the same allocator as the command.

use crate::config::Settings;

/// mimalloc instead of glibc's malloc: a turn allocates in many small pieces across
/// threads (JSON, HTTP, sqlx rows), and glibc's `malloc`/`free`/`malloc_consolidate` took
/// about an eighth of serve's samples under 200 turns a second. Built without its
/// transparent-huge-page advice (`no_thp`): with it, 10,000 rooms' peak RSS went from 55
/// to 85 MiB. Measured side by side with `cargo bench --bench pipeline -- turns memory`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The async runtime. Its threads get 8 MiB of stack, not tokio's 2: the crypto library's
/// futures are deep (it boxes the largest, and so does richbot), and a stack overflow is
/// an abort, not an error; 8 MiB is what a main thread gets, and costs address space only.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().thread_stack_size(8 * 1024 * 1024).build()
}

/// Logging to stderr, by `RUST_LOG` or else `logging.filter` (`info`), as text or JSON
/// (`logging.format`).
pub fn init_logging(settings: &Settings) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(settings.config.logging.filter.as_deref().unwrap_or("info")))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    if settings.config.logging.format.as_deref() == Some("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}
