//! Wall-clock time in milliseconds since the epoch: what Matrix timestamps and the edit
//! pace (shared through the database) are measured in; and its RFC 3339 form, for what
//! people and the model read.

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// `d` in milliseconds, as timestamps are counted (saturating: a span of more than 292
/// million years is "for ever").
pub fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How long a task that acts at `next` (epoch ms; none known) sleeps: until then, at most
/// `most` (to look for work others made) and at least `least` (a failure is not retried
/// in a busy loop). The poll closer's and the schedule ticker's.
pub fn sleep_for(next: Option<i64>, most: std::time::Duration, least: std::time::Duration) -> std::time::Duration {
    let until = |at: i64| std::time::Duration::from_millis(u64::try_from(at.saturating_sub(now_ms())).unwrap_or(0));
    next.map_or(most, until).min(most).max(least)
}

/// `2026-11-29T20:37:00Z` from epoch milliseconds (UTC).
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_format_as_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_979_710_219), "2026-11-29T19:15:10Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
    }
}
