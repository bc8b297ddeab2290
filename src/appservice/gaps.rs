//! Transactions the homeserver made but never sent.
//!
//! Synapse numbers an appservice's transactions one by one. At the end of its recovery
//! from an outage of the appservice (richbot restarting), it can store a transaction and
//! never send it while it takes the appservice for up again: one made between the
//! recoverer's last look for unsent transactions and its marking the appservice up
//! (Synapse 1.163; a CI run lost a question so, the transaction left in
//! `application_services_txns` with the appservice `up`). It sends such a transaction
//! only when a later send fails and starts a recoverer, which sends the oldest unsent
//! first.
//!
//! So when a transaction's number skips a few past the last one's, richbot stores its
//! events as usual and answers 503 once. Synapse's recoverer then sends the skipped ones,
//! oldest first, and this one again (a duplicate, answered 200). Only after a step of one
//! (the race comes right after a restart, when little has been seen; other homeservers
//! name transactions by hash or time, which are not numbers in a row), never twice for
//! one transaction, and only on a single instance (several share the transactions). The
//! numbers are kept in memory: a transaction lost just before the first one after a
//! start is not seen.

use std::sync::Mutex;

/// Steps of one seen in a row before a skip is taken for a lost transaction.
const TRUSTED_AFTER: u32 = 1;
/// The most transactions a skip may leave out and still be asked for (more is a
/// homeserver that numbers otherwise, or a numbering started over).
const MAX_SKIPPED: u64 = 100;

/// The transaction numbers seen by this process.
#[derive(Debug, Default)]
pub struct Gaps(Mutex<Seen>);

#[derive(Debug, Default)]
struct Seen {
    last: Option<u64>,
    in_a_row: u32,
    /// The transaction already answered 503 for a skip before it (asked once).
    asked: Option<u64>,
}

impl Gaps {
    /// Notes that transaction `txn_id` was stored; returns the numbers it skipped (first,
    /// last) when the homeserver should be asked to send them.
    pub fn stored(&self, txn_id: &str) -> Option<(u64, u64)> {
        let n: u64 = txn_id.parse().ok()?;
        let mut seen = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(last) = seen.last else {
            seen.last = Some(n);
            return None;
        };
        if Some(n) == last.checked_add(1) {
            seen.last = Some(n);
            seen.in_a_row = seen.in_a_row.saturating_add(1);
            return None;
        }
        if n <= last {
            // A retry of one seen, or the homeserver's numbering started over.
            if n.saturating_add(MAX_SKIPPED) < last {
                *seen = Seen { last: Some(n), ..Seen::default() };
            }
            return None;
        }
        let skipped = (last + 1, n - 1);
        if seen.in_a_row >= TRUSTED_AFTER && n - last - 1 <= MAX_SKIPPED && seen.asked != Some(n) {
            seen.asked = Some(n);
            return Some(skipped);
        }
        // Asked already and they did not come (or numbers that skip anyway): go on.
        *seen = Seen { last: Some(n), ..Seen::default() };
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(gaps: &Gaps, ids: &[u64]) -> Vec<Option<(u64, u64)>> {
        ids.iter().map(|n| gaps.stored(&n.to_string())).collect()
    }

    #[test]
    fn a_skip_after_numbers_one_by_one_is_asked_for_once_then_the_numbers_go_on() {
        let gaps = Gaps::default();
        // As after a restart in CI: 10 and 11 recovered, 12 left unsent, 13 sent.
        assert_eq!(run(&gaps, &[10, 11]), [None; 2]);
        assert_eq!(gaps.stored("13"), Some((12, 12)), "12 never came");
        // The recoverer sends 12, then 13 again; then on as before.
        assert_eq!(run(&gaps, &[12, 13, 14]), [None; 3]);
        assert_eq!(gaps.stored("17"), Some((15, 16)));
        // Asked, and 17 came again without them: they are not asked for twice.
        assert_eq!(gaps.stored("17"), None);
        assert_eq!(gaps.stored("19"), None, "no step of one since");
        assert_eq!(gaps.stored("20"), None);
        assert_eq!(gaps.stored("22"), Some((21, 21)), "trusted again after a step of one");
    }

    #[test]
    fn numbers_that_skip_anyway_or_are_not_numbers_are_never_asked_about() {
        let gaps = Gaps::default();
        assert_eq!(run(&gaps, &[3, 10, 17, 40, 52]), [None; 5], "numbers that never step by one");
        let gaps = Gaps::default();
        assert_eq!(run(&gaps, &[1, 2, 3, 4, 500]), [None; 5], "more skipped than a race loses");
        let gaps = Gaps::default();
        assert_eq!(gaps.stored("abc"), None);
        assert_eq!(run(&gaps, &[1, 2, 3, 4]), [None; 4]);
        assert_eq!(gaps.stored("x7"), None);
        let gaps = Gaps::default();
        let top = u64::MAX.to_string();
        assert_eq!((gaps.stored(&top), gaps.stored(&top), gaps.stored("0")), (None, None, None), "no overflow");
    }

    #[test]
    fn a_retry_changes_nothing_and_a_numbering_started_over_is_followed() {
        let gaps = Gaps::default();
        assert_eq!(run(&gaps, &[500, 501, 502, 503, 501]), [None; 5]);
        assert_eq!(gaps.stored("505"), Some((504, 504)), "the retry of 501 broke no run");
        let gaps = Gaps::default();
        assert_eq!(run(&gaps, &[500, 501, 502, 503, 1, 2]), [None; 6]);
        assert_eq!(gaps.stored("4"), Some((3, 3)), "counted from 1 again");
    }
}
