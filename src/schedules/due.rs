//! What a due schedule does now, pure: of its occurrences from `next_at` to now, the
//! latest fires (marked late past [`LATE_AFTER_MS`](super::LATE_AFTER_MS)) unless it is
//! more than `max_late` old; the ones before it were missed (richbot was down) and are
//! skipped, never replayed in a burst. Then `next_at` moves to the first occurrence after
//! now, or the schedule is done; a recurrence starts again from its latest time.

use super::When;

/// The decision for one due schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The occurrence to fire, and whether it is late.
    pub fire: Option<(i64, bool)>,
    /// Occurrences skipped.
    pub skipped: u64,
    /// The next occurrence after now (`None`: the schedule is done).
    pub next: Option<i64>,
    /// A recurrence's new start: the latest of its times up to now (`When::rebased`),
    /// so that it is not expanded from its first start for ever.
    pub start: Option<i64>,
}

/// Decides for a schedule of `when` whose next occurrence, `next_at`, is at or before `now`.
pub fn due(when: &When, next_at: i64, now: i64, max_late_ms: i64) -> Due {
    let next = when.next_after(now);
    let Some((latest, before)) = when.latest_in(next_at, now) else {
        return Due { fire: None, skipped: 0, next, start: None };
    };
    let start = when.rebased(latest);
    if now - latest > max_late_ms {
        return Due { fire: None, skipped: before + 1, next, start };
    }
    Due { fire: Some((latest, now - latest > super::LATE_AFTER_MS)), skipped: before, next, start }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::when::{rule, time, zone};

    const HOUR: i64 = 3_600_000;

    fn hourly(start: i64) -> When {
        let tz = zone("UTC").expect("zone");
        When::Every { rule: rule("FREQ=HOURLY", tz, start).expect("rule"), tz, start }
    }

    #[test]
    fn an_occurrence_on_time_fires_and_the_next_is_the_one_after_now() {
        let start = time("2026-12-05T10:00:00Z").expect("time");
        let d = due(&hourly(start), start + HOUR, start + HOUR + 2_000, HOUR);
        let next = Some(start + 2 * HOUR);
        assert_eq!(d, Due { fire: Some((start + HOUR, false)), skipped: 0, next, start: Some(start + HOUR) });
    }

    #[test]
    fn after_an_outage_only_the_latest_missed_occurrence_fires_marked_late_and_older_ones_are_skipped() {
        let start = time("2026-12-05T10:00:00Z").expect("time");
        // Down from 10:30 to 13:20: 11:00 and 12:00 were missed, 13:00 is 20 minutes late.
        let now = start + 3 * HOUR + 20 * 60_000;
        let d = due(&hourly(start), start + HOUR, now, HOUR);
        let (next, rebased) = (Some(start + 4 * HOUR), Some(start + 3 * HOUR));
        assert_eq!(d, Due { fire: Some((start + 3 * HOUR, true)), skipped: 2, next, start: rebased });
    }

    #[test]
    fn an_occurrence_later_than_max_late_is_skipped_not_fired() {
        let at = time("2026-12-05T10:00:00Z").expect("time");
        let d = due(&When::At(at), at, at + 2 * HOUR, HOUR);
        assert_eq!(d, Due { fire: None, skipped: 1, next: None, start: None });
        let d = due(&When::At(at), at, at + HOUR, HOUR);
        assert_eq!(d, Due { fire: Some((at, true)), skipped: 0, next: None, start: None });
        let d = due(&When::At(at), at, at + 500, HOUR);
        assert_eq!(d, Due { fire: Some((at, false)), skipped: 0, next: None, start: None });
    }
}
