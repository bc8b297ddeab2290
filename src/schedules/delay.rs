//! A delay as a person (or a small model) writes it: "in 2 minutes", "1 hour 30 min",
//! "+90s", "PT2M". A model asked to "remind me in 2 minutes" rarely computes an RFC 3339
//! time from the turn's clock, and often gives the delay instead: `schedule`'s `at` takes
//! either. A delay counts from the person's words ([`CallTime`]), not from the call: a slow
//! model on a CPU makes it a minute later, and "in 2 minutes" means two minutes from when
//! they said it.

/// The longest delay read (past a schedule's one-year horizon, which refuses it clearly).
const MOST: f64 = 400.0 * 86_400_000.0;

/// When a schedule call is read: `now`, and when the person asked (`asked`, at most
/// `now`), which a delay counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTime {
    pub asked: i64,
    pub now: i64,
}

/// How soon a delay fires that passed while the model answered.
const PASSED_MS: i64 = 1_000;

impl CallTime {
    /// A call with no person's words behind it (another agent's request): from now.
    pub fn now(now: i64) -> Self {
        Self { asked: now, now }
    }

    /// The time `delay` ms after the person asked; one that passed while the model was
    /// answering fires at once (a second from now), late rather than never.
    pub fn after(self, delay: i64) -> i64 {
        self.asked.min(self.now).saturating_add(delay).max(self.now.saturating_add(PASSED_MS))
    }
}

/// The milliseconds `text` says, or `None` when it is no delay (then it may be a time).
pub fn millis(text: &str) -> Option<i64> {
    let text = text.trim().to_ascii_lowercase();
    if let Some(iso) = text.strip_prefix("pt") {
        return iso8601(iso);
    }
    let text = text.strip_prefix("in ").or_else(|| text.strip_prefix('+')).unwrap_or(&text);
    let words = text.replace(',', " ").replace(" and ", " ");
    let mut rest = words.trim();
    let mut total: i64 = 0;
    let mut parts = 0;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let (amount, after) = match number {
            // "an hour", "a minute"
            "" => match after.split_once(' ') {
                Some(("a" | "an", unit)) => (1.0, unit),
                _ => return None,
            },
            n => (n.parse::<f64>().ok()?, after),
        };
        let after = after.trim_start();
        let unit_end = after.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale = unit_millis(unit)?;
        let ms = amount * scale as f64;
        if !(0.0..=MOST).contains(&ms) {
            return None;
        }
        total = total.checked_add(ms.round() as i64)?;
        parts += 1;
        rest = after.trim_start();
    }
    (parts > 0 && total > 0).then_some(total)
}

fn unit_millis(unit: &str) -> Option<i64> {
    Some(match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        "w" | "week" | "weeks" => 7 * 86_400_000,
        _ => return None,
    })
}

/// The time part of an ISO 8601 duration (`2h30m`, `90s`, after `PT`).
fn iso8601(text: &str) -> Option<i64> {
    let mut total: i64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'h' | 'm' | 's' => {
                let amount: f64 = number.parse().ok()?;
                number.clear();
                let scale = match c {
                    'h' => 3_600_000.0,
                    'm' => 60_000.0,
                    _ => 1_000.0,
                };
                let ms = amount * scale;
                if ms > MOST {
                    return None;
                }
                total = total.checked_add(ms.round() as i64)?;
            }
            _ => return None,
        }
    }
    (number.is_empty() && total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::{CallTime, millis};

    #[test]
    fn a_delay_counts_from_the_persons_words_and_one_passed_fires_at_once() {
        let asked = CallTime { asked: 1_000_000, now: 1_073_000 };
        assert_eq!(asked.after(120_000), 1_120_000, "two minutes from the words, not from the call");
        assert_eq!(asked.after(30_000), 1_074_000, "passed while the model answered: at once");
        assert_eq!(CallTime::now(1_000_000).after(60_000), 1_060_000);
        let skewed = CallTime { asked: 2_000_000, now: 1_000_000 };
        assert_eq!(skewed.after(60_000), 1_060_000, "words from the future count from now");
    }

    #[test]
    fn delays_as_people_and_models_write_them() {
        for (text, ms) in [
            ("in 2 minutes", 120_000),
            ("2 minutes", 120_000),
            ("In 1 Minute", 60_000),
            ("+90s", 90_000),
            ("in an hour", 3_600_000),
            ("1 hour 30 min", 5_400_000),
            ("1h, 30m", 5_400_000),
            ("2 days and 3 hours", 2 * 86_400_000 + 3 * 3_600_000),
            ("1.5 hours", 5_400_000),
            ("PT2M", 120_000),
            ("pt1h30m", 5_400_000),
        ] {
            assert_eq!(millis(text), Some(ms), "{text}");
        }
    }

    #[test]
    fn times_and_nonsense_are_no_delay() {
        for text in [
            "2026-12-24T09:00:00+01:00",
            "tomorrow",
            "in 2 fortnights",
            "0 minutes",
            "",
            "in",
            "PT",
            "PT2X",
            "1e308 hours",
            "99999999999999999999 days",
            "-5 minutes",
            "5",
        ] {
            assert_eq!(millis(text), None, "{text}");
        }
    }
}
