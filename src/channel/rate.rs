//! `writes_per_minute`: a token bucket per client (full at start, refilled continuously),
//! in this process. A write that finds it empty is refused with how long to wait.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// The clients' buckets.
#[derive(Debug, Default)]
pub struct Rate {
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Rate {
    /// Takes one write from `client`'s bucket of `per_minute`, or says how many seconds
    /// until there is one.
    pub fn take(&self, client: &str, per_minute: u32, now: Instant) -> Result<(), u64> {
        let per_sec = f64::from(per_minute.max(1)) / 60.0;
        let capacity = f64::from(per_minute.max(1));
        let Ok(mut buckets) = self.buckets.lock() else { return Ok(()) };
        let (tokens, at) = buckets.entry(client.to_owned()).or_insert((capacity, now));
        let refilled = (*tokens + now.saturating_duration_since(*at).as_secs_f64() * per_sec).min(capacity);
        *at = now;
        if refilled >= 1.0 {
            *tokens = refilled - 1.0;
            return Ok(());
        }
        *tokens = refilled;
        Err(((1.0 - refilled) / per_sec).ceil().max(1.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_full_bucket_gives_its_writes_then_one_per_refill() {
        let rate = Rate::default();
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(rate.take("ci", 3, start), Ok(()));
        }
        // Three a minute: the next one in 20 s.
        assert_eq!(rate.take("ci", 3, start), Err(20));
        assert_eq!(rate.take("other", 3, start), Ok(()), "each client has its own bucket");
        assert_eq!(rate.take("ci", 3, start + Duration::from_secs(19)), Err(1));
        assert_eq!(rate.take("ci", 3, start + Duration::from_secs(20)), Ok(()));
        assert_eq!(rate.take("ci", 3, start + Duration::from_secs(21)), Err(19));
    }
}
