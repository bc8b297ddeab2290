//! When a schedule fires: once (`at`, an RFC 3339 time with its offset) or by an RFC 5545
//! rule (`every`, e.g. `FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0`) in an IANA zone, from a
//! start. The rule is expanded in the zone's local time (the `rrule` crate, with the zone
//! database compiled in by `chrono-tz`), so "every day at 09:00" stays at 09:00 local
//! across daylight-saving changes. Pure: times are epoch milliseconds.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use rrule::{RRule, RRuleSet, Unvalidated};

/// Occurrences looked at, at most, to find one (a rule that matches rarely or never ends
/// there rather than loop).
const LOOK_AT: usize = 100_000;

/// When a schedule fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Once, at this time.
    At(i64),
    /// By `rule` (without `DTSTART`), in `tz`, from `start`.
    Every { rule: String, tz: Tz, start: i64 },
}

/// Reads an IANA zone name (`Europe/Lisbon`, `UTC`).
pub fn zone(name: &str) -> Result<Tz, String> {
    Tz::from_str(name.trim()).map_err(|_| {
        format!("unknown time zone {:?}; use an IANA name such as \"Europe/Lisbon\" or \"UTC\"", cut(name))
    })
}

/// Reads a time for `at`: RFC 3339 with its offset, or a local time without one
/// (`2026-12-24T09:00`, `2026-12-24 09:00:00`) in `tz`.
pub fn time_in(text: &str, tz: Tz) -> Result<i64, String> {
    let text = text.trim();
    let naive = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok());
    match naive {
        Some(local) => tz
            .from_local_datetime(&local)
            .earliest()
            .map(|t| t.timestamp_millis())
            .ok_or_else(|| format!("{:?} does not exist in {} (a daylight-saving gap)", cut(text), tz.name())),
        None => time(text),
    }
}

/// Reads an RFC 3339 time with its offset (`2026-12-24T09:00:00+01:00`, or `Z`).
pub fn time(text: &str) -> Result<i64, String> {
    DateTime::parse_from_rfc3339(text.trim()).map(|t| t.timestamp_millis()).map_err(|_| {
        format!("{:?} is not an RFC 3339 time with an offset, such as \"2026-12-24T09:00:00+01:00\"", cut(text))
    })
}

/// Reads an RFC 5545 rule (`FREQ=...`, with or without the `RRULE:` name); a rule that
/// cannot be expanded from `start` in `tz` is refused with why. A `COUNT` becomes the
/// `UNTIL` of its last time ([`until_for_count`]). Expands the rule: call it off the
/// async workers (`schedules::off_workers`).
pub fn rule(text: &str, tz: Tz, start: i64) -> Result<String, String> {
    let text = text.trim();
    let body = text.strip_prefix("RRULE:").unwrap_or(text);
    if body.contains('\n') || body.to_ascii_uppercase().contains("DTSTART") {
        return Err("give the rule alone (FREQ=...); its start goes in \"start\"".to_owned());
    }
    let parsed: RRule<Unvalidated> =
        body.parse().map_err(|e| format!("not an RFC 5545 recurrence rule ({e}); for example FREQ=DAILY;BYHOUR=9"))?;
    let count = parsed.get_count();
    let set = parsed.build(local(start, tz)).map_err(|e| format!("the rule cannot be used: {e}"))?;
    match count {
        None => Ok(body.to_owned()),
        Some(n) => until_for_count(body, set, n),
    }
}

/// `body` with its `COUNT=n` made the `UNTIL` of its `n`th time, so that the rule can be
/// started again at any of its times (`When::rebased`) and still end there: counted from
/// a later start, `COUNT` would count again.
fn until_for_count(body: &str, set: RRuleSet, n: u32) -> Result<String, String> {
    let wanted = usize::try_from(n).unwrap_or(usize::MAX);
    if wanted > LOOK_AT {
        return Err(format!("COUNT may be at most {LOOK_AT}; give an UNTIL time for longer"));
    }
    let last = (&set.limit()).into_iter().take(wanted).last().ok_or("it never fires")?;
    let until = last.with_timezone(&Utc).format("%Y%m%dT%H%M%SZ");
    let parts: Vec<String> =
        body.split(';')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                if p.trim().to_ascii_uppercase().starts_with("COUNT=") {
                    format!("UNTIL={until}")
                } else {
                    p.to_owned()
                }
            })
            .collect();
    Ok(parts.join(";"))
}

impl When {
    /// Up to `n` occurrences after `after` (not at it), in order.
    pub fn after(&self, after: i64, n: usize) -> Vec<i64> {
        match self {
            When::At(at) => [*at].into_iter().filter(|at| *at > after).take(n).collect(),
            When::Every { .. } => self.occurrences().skip_while(|t| *t <= after).take(n).collect(),
        }
    }

    /// The first occurrence after `after`.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        self.after(after, 1).first().copied()
    }

    /// The occurrences from `from` to `to` (both included): the latest, and how many
    /// came before it.
    pub fn latest_in(&self, from: i64, to: i64) -> Option<(i64, u64)> {
        let mut found: Option<(i64, u64)> = None;
        let within = |t: &i64| (from..=to).contains(t);
        let all: Box<dyn Iterator<Item = i64>> = match self {
            When::At(at) => Box::new(std::iter::once(*at)),
            When::Every { .. } => Box::new(self.occurrences()),
        };
        for t in all.skip_while(|t| *t < from).take_while(|t| *t <= to).filter(within) {
            found = Some((t, found.map_or(0, |(_, n)| n + 1)));
        }
        found
    }

    /// A recurrence's start moved on to `occurrence` (one of its own), so that its times
    /// are found from there rather than from its first start: the same times, unless the
    /// rule counts them (`COUNT`), which a later start would count again.
    pub fn rebased(&self, occurrence: i64) -> Option<i64> {
        match self {
            When::Every { rule, start, .. } if occurrence > *start && !rule.to_ascii_uppercase().contains("COUNT") => {
                Some(occurrence)
            }
            _ => None,
        }
    }

    /// The zone the schedule's times are written in (`UTC` for a one-off).
    pub fn zone(&self) -> Option<Tz> {
        match self {
            When::At(_) => None,
            When::Every { tz, .. } => Some(*tz),
        }
    }

    /// A recurring schedule's occurrences, from its start (at most [`LOOK_AT`]).
    fn occurrences(&self) -> Box<dyn Iterator<Item = i64>> {
        let When::Every { rule, tz, start } = self else { return Box::new(std::iter::empty()) };
        let set: Option<RRuleSet> =
            rule.parse::<RRule<Unvalidated>>().ok().and_then(|r| r.build(local(*start, *tz)).ok());
        match set {
            Some(set) => Box::new((&set.limit()).into_iter().take(LOOK_AT).map(|t| t.timestamp_millis())),
            None => Box::new(std::iter::empty()),
        }
    }
}

/// `ms` in `tz`, as the rule library takes it.
fn local(ms: i64, tz: Tz) -> DateTime<rrule::Tz> {
    let utc = Utc.timestamp_millis_opt(ms).single().unwrap_or_default();
    utc.with_timezone(&rrule::Tz::Tz(tz))
}

/// `ms` in `tz` as RFC 3339 with the zone's offset then: `2026-12-24T09:00:00+01:00`.
pub fn rfc3339_in(ms: i64, tz: Tz) -> String {
    let t = Utc.timestamp_millis_opt(ms).single().unwrap_or_default().with_timezone(&tz);
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

/// `ms` in `tz` for people: `Thu 24 Dec 2026, 09:00 (Europe/Lisbon)`.
pub fn spoken(ms: i64, tz: Tz) -> String {
    let t = Utc.timestamp_millis_opt(ms).single().unwrap_or_default().with_timezone(&tz);
    format!("{} ({})", t.format("%a %-d %b %Y, %H:%M"), tz.name())
}

fn cut(s: &str) -> String {
    crate::blocks::cut(s, 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: &str) -> i64 {
        time(t).expect("time")
    }

    #[test]
    fn a_daily_rule_keeps_its_local_hour_across_daylight_saving() {
        let tz = zone("Europe/Lisbon").expect("zone");
        let start = ms("2026-03-27T00:00:00Z");
        let rule = rule("FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0", tz, start).expect("rule");
        let every = When::Every { rule, tz, start };
        let times: Vec<String> = every.after(start, 4).into_iter().map(|t| rfc3339_in(t, chrono_tz::UTC)).collect();
        // Lisbon moves from UTC+0 to UTC+1 on 29 March 2026: 09:00 local is 08:00 UTC then.
        assert_eq!(
            times,
            [
                "2026-03-27T09:00:00+00:00",
                "2026-03-28T09:00:00+00:00",
                "2026-03-29T08:00:00+00:00",
                "2026-03-30T08:00:00+00:00"
            ]
        );
        assert_eq!(rfc3339_in(ms("2026-03-30T08:00:00Z"), tz), "2026-03-30T09:00:00+01:00");
        assert_eq!(spoken(ms("2026-03-30T08:00:00Z"), tz), "Mon 30 Mar 2026, 09:00 (Europe/Lisbon)");
    }

    #[test]
    fn the_latest_occurrence_in_a_span_is_found_with_how_many_came_before_it() {
        let tz = zone("UTC").expect("zone");
        let start = ms("2026-12-05T10:00:00Z");
        let every = When::Every { rule: rule("FREQ=MINUTELY", tz, start).expect("rule"), tz, start };
        let (from, to) = (ms("2026-12-05T10:02:00Z"), ms("2026-12-05T10:07:30Z"));
        assert_eq!(every.latest_in(from, to), Some((ms("2026-12-05T10:07:00Z"), 5)));
        assert_eq!(every.next_after(to), Some(ms("2026-12-05T10:08:00Z")));
        assert_eq!(When::At(from).latest_in(from, to), Some((from, 0)));
        assert_eq!(When::At(from).latest_in(from + 1, to), None);
        assert_eq!(When::At(from).next_after(from), None);
    }

    #[test]
    fn a_rule_started_again_at_one_of_its_times_has_the_same_times_after_it() {
        let tz = zone("Europe/Lisbon").expect("zone");
        let start = ms("2026-01-05T09:00:00Z");
        let rule = rule("FREQ=WEEKLY;INTERVAL=2;BYHOUR=9;BYMINUTE=0;BYSECOND=0", tz, start).expect("rule");
        let every = When::Every { rule: rule.clone(), tz, start };
        let later = every.after(ms("2026-06-01T00:00:00Z"), 1)[0];
        let rebased = When::Every { rule, tz, start: every.rebased(later).expect("rebased") };
        assert_eq!(rebased.after(later, 5), every.after(later, 5));
        let counted = When::Every { rule: "FREQ=DAILY;COUNT=3".into(), tz, start };
        assert_eq!(
            counted.rebased(start + 86_400_000),
            None,
            "a counted rule (stored before COUNT was read) keeps its start"
        );
    }

    #[test]
    fn a_count_becomes_the_until_of_its_last_time_so_a_rebased_rule_ends_there_too() {
        let tz = zone("Europe/Lisbon").expect("zone");
        let start = ms("2026-12-05T09:00:00Z");
        let rule = rule("FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0;COUNT=3", tz, start).expect("rule");
        assert_eq!(rule, "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0;UNTIL=20261207T090000Z");
        let every = When::Every { rule: rule.clone(), tz, start };
        let times = every.after(start - 1, 10);
        assert_eq!(times.len(), 3, "three times, as counted");
        let rebased = When::Every { rule, tz, start: every.rebased(times[1]).expect("rebased") };
        assert_eq!(
            rebased.after(times[1], 10),
            [times[2]],
            "started again at its second time, it still ends at its third"
        );
        assert!(super::rule("FREQ=SECONDLY;COUNT=200000", tz, start).unwrap_err().contains("COUNT may be at most"));
    }

    #[test]
    fn bad_zones_times_and_rules_say_what_is_wrong() {
        assert!(zone("Mars/Olympus").unwrap_err().contains("unknown time zone \"Mars/Olympus\""));
        assert!(time("tomorrow at 9").unwrap_err().contains("not an RFC 3339 time"));
        assert!(time("2026-12-24T09:00:00").is_err(), "an offset is required");
        let tz = zone("UTC").expect("zone");
        assert!(rule("every day", tz, 0).unwrap_err().contains("not an RFC 5545 recurrence rule"));
        assert!(rule("DTSTART:20261205T100000Z\nRRULE:FREQ=DAILY", tz, 0).unwrap_err().contains("start"));
        assert_eq!(rule("RRULE:FREQ=DAILY", tz, 0).as_deref(), Ok("FREQ=DAILY"));
    }
}
