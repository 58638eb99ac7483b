//! The rollover rule: the range of a script call that rolled the sequence over is never handed
//! out, because its millisecond can be handed out again by the next call after the 1 ms lock.
//!
//! icicle's script reserves `start..=end` of a rolling sequence and then reads the node's
//! `TIME`. When the sequence reaches 4095 it resets it to −1 and sets a 1 ms lock, so that the
//! next cycle cannot start in the same millisecond. But the lock is timed from the start of the
//! call (Redis 7 freezes a script's time for key expiry; Redis 6 reads it at `PSETEX`), while
//! the millisecond of the IDs comes from `TIME`, read after. A node descheduled for 2 ms or more
//! inside that one call (a busy host, a noisy neighbour) reports a `TIME` at which the lock has
//! already expired: the next call starts a new cycle at sequence 0 *in the same millisecond*,
//! and every sequence value the two calls share is issued twice. The chaos scenario
//! `redis-sentinel` saw exactly that on a loaded machine: 4,096 duplicates, one full
//! millisecond, from two calls of one server.
//!
//! Every other call of a cycle is safe: it ran before the rolling call started, so its `TIME`
//! is at or before the instant the lock was timed from, and the next cycle's calls start after
//! the lock expired, so their `TIME` is later. Only the rolling call's own range can meet the
//! next cycle's. So the client discards it (one range per 4,096 sequence values: one or two IDs
//! when calls ask for the most, see [`MAX_PER_CALL`]); icicle's Java client hands it out. A
//! Java client sharing the node still does, so a mixed fleet keeps the hazard for the IDs that
//! client issues.

use idmint_core::Icicle;

/// The most IDs one script call asks for: 4,094, two short of the sequence's 4,096 values, so
/// that the first call on a fresh node (no sequence key: `INCRBY` counts from 0) and the first
/// after a rollover (sequence −1) end below 4,095 and do not roll over themselves. The next
/// call then rolls over with a range of one or two IDs, the only ones discarded in that cycle.
/// (A call asking for 4,096 from −1 would end at 4,095, roll over, and be discarded whole,
/// every time.)
pub(crate) const MAX_PER_CALL: usize = Icicle::MAX_SEQUENCE as usize - 1;

/// Whether a script call with this range rolled the sequence over: the script truncates a
/// rolling range at 4,095, and a range that does not roll ends below it.
pub(crate) fn rolled_over(end: i64) -> bool {
    end >= Icicle::MAX_SEQUENCE as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node running icicle's script, with Redis' timing: the lock's expiry is timed from the
    /// call's start, the IDs' millisecond is `TIME`, read at the call's end.
    #[derive(Default)]
    struct Node {
        sequence: i64,
        /// The lock's expiry (Unix ms): the key exists while `now <= expiry`.
        lock: Option<u64>,
    }

    impl Node {
        /// One call asking for `n` at `start_ms`, its `TIME` read at `time_ms`: the range and
        /// the millisecond, or `None` for the lock error.
        fn call(&mut self, n: i64, start_ms: u64, time_ms: u64) -> Option<(i64, i64, u64)> {
            if self.lock.is_some_and(|expiry| start_ms <= expiry) {
                return None;
            }
            let mut end = self.sequence + n;
            let start = end - n + 1;
            if end >= Icicle::MAX_SEQUENCE as i64 {
                self.sequence = -1;
                self.lock = Some(start_ms + 1);
                end = Icicle::MAX_SEQUENCE as i64;
            } else {
                self.sequence = end;
            }
            Some((start, end, time_ms))
        }
    }

    /// One call of a schedule: how many it asks for, the ms before it starts, and the ms the
    /// node is descheduled inside it (between its start and its `TIME`).
    type Call = (i64, u64, u64);

    /// Runs `calls` (one after another, as Redis runs scripts) from sequence `first`, and counts
    /// the (millisecond, sequence) pairs handed out twice, with or without the rollover rule.
    fn duplicates(first: i64, calls: &[Call], rule: bool) -> usize {
        let mut node = Node { sequence: first, lock: None };
        let mut now = 1_000;
        let mut handed: Vec<(u64, i64, i64)> = Vec::new();
        let mut twice = 0;
        for &(n, gap, stall) in calls {
            now += gap;
            let start = now;
            now += stall;
            let Some((from, to, ms)) = node.call(n, start, now) else { continue };
            if rule && rolled_over(to) {
                continue;
            }
            for &(seen_ms, seen_from, seen_to) in &handed {
                if seen_ms == ms {
                    twice += (to.min(seen_to) - from.max(seen_from) + 1).max(0) as usize;
                }
            }
            handed.push((ms, from, to));
        }
        twice
    }

    #[test]
    fn a_stalled_rolling_call_repeats_a_millisecond_unless_its_range_is_discarded() {
        // The chaos finding: a full range from −1 rolls over, the node stalls 2 ms before
        // `TIME`, and the next call (its lock expired) starts again at 0 in that millisecond.
        let calls = [(4096, 0, 2), (4096, 0, 0)];
        assert_eq!(duplicates(-1, &calls, false), 4096, "icicle's rule repeats the millisecond");
        assert_eq!(duplicates(-1, &calls, true), 0);
        // A stall of 1 ms is not enough: the lock still stands at the next call's start.
        assert_eq!(duplicates(-1, &[(4096, 0, 1), (4096, 0, 0)], false), 0);
    }

    #[test]
    fn no_schedule_of_calls_repeats_an_id_under_the_rule() {
        // Every schedule of three calls over these sizes, gaps and stalls, from three starting
        // sequences: the rule never hands out a pair twice, and without it some schedules do
        // (the negative control).
        let sizes = [1, 2_000, MAX_PER_CALL as i64, 4_096];
        let gaps = [0, 1, 2];
        let stalls = [0, 1, 2, 3];
        let mut options = Vec::new();
        for &n in &sizes {
            for &gap in &gaps {
                for &stall in &stalls {
                    options.push((n, gap, stall));
                }
            }
        }
        let (mut schedules, mut caught) = (0, 0);
        for first in [-1, 2_000, 4_094] {
            for a in &options {
                for b in &options {
                    for c in &options {
                        let calls = [*a, *b, *c];
                        assert_eq!(duplicates(first, &calls, true), 0, "{first} {calls:?}");
                        caught += usize::from(duplicates(first, &calls, false) > 0);
                        schedules += 1;
                    }
                }
            }
        }
        assert!(caught > 0 && caught < schedules, "{caught} of {schedules} without the rule");
    }

    #[test]
    fn calls_of_the_most_discard_one_or_two_ids_per_cycle() {
        // (sequence before, range of the first call, range of the second, which rolls over)
        for (first, one, two) in [(0, (1, 4094), (4095, 4095)), (-1, (0, 4093), (4094, 4095))] {
            let mut node = Node { sequence: first, lock: None };
            let n = MAX_PER_CALL as i64;
            let a = node.call(n, 0, 0).expect("unlocked");
            assert_eq!((a.0, a.1), one);
            assert!(!rolled_over(a.1), "{first}: the first call does not roll over");
            let b = node.call(n, 1, 1).expect("unlocked");
            assert_eq!((b.0, b.1), two);
            assert!(rolled_over(b.1), "{first}: the second one does, and is discarded");
        }
    }
}
