//! The failover guard's bookkeeping, free of I/O: per logical shard, which Redis lineage
//! served it last and the last millisecond seen; it decides whether a batch may be handed
//! out. The client does the network side (reading the lineage, setting the lock).

use std::collections::HashMap;

/// The history a node's data belongs to: the Redis process (`run_id`, new on every start) and
/// its replication history (`master_replid`, new when a replica is promoted or a node starts
/// empty). Neither value ever comes back once it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lineage {
    /// `INFO server` → `run_id`.
    pub(crate) run_id: String,
    /// `INFO replication` → `master_replid`.
    pub(crate) replid: String,
}

/// What the guard remembers of one logical shard.
#[derive(Debug)]
struct ShardRecord {
    /// The lineage that served the shard last.
    lineage: Lineage,
    /// The last millisecond (Unix ms) of any accepted ID of the shard.
    seen_ms: u64,
    /// IDs at or below this millisecond are refused: the `seen_ms` of the last lineage change.
    floor_ms: u64,
}

/// The guard's decision on one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Hand the batch out.
    Accept,
    /// Refuse it: the shard changed lineage and the batch's millisecond is not after
    /// `floor_ms`. Lock the node until its clock passes `floor_ms`.
    Refuse {
        /// The last millisecond seen before the change.
        floor_ms: u64,
    },
}

/// The failover guard of one client (see the module docs of `icicle`).
#[derive(Debug, Default)]
pub(crate) struct Guard {
    shards: HashMap<u16, ShardRecord>,
}

impl Guard {
    /// Decides on a batch of `shard` at `time_ms`, produced by `lineage`, and records it.
    ///
    /// The first batch of a shard is accepted (there is nothing to compare with). A batch from
    /// another lineage than the shard's last one raises the shard's floor to the last
    /// millisecond seen; any batch at or below the floor is refused. Accepted batches raise
    /// the last millisecond seen.
    pub(crate) fn check(&mut self, shard: u16, lineage: &Lineage, time_ms: u64) -> Verdict {
        let Some(record) = self.shards.get_mut(&shard) else {
            let record = ShardRecord { lineage: lineage.clone(), seen_ms: time_ms, floor_ms: 0 };
            self.shards.insert(shard, record);
            return Verdict::Accept;
        };
        if record.lineage != *lineage {
            record.floor_ms = record.floor_ms.max(record.seen_ms);
            record.lineage = lineage.clone();
        }
        if time_ms <= record.floor_ms {
            return Verdict::Refuse { floor_ms: record.floor_ms };
        }
        record.seen_ms = record.seen_ms.max(time_ms);
        Verdict::Accept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lineage(run_id: &str, replid: &str) -> Lineage {
        Lineage { run_id: run_id.into(), replid: replid.into() }
    }

    /// Feeds `(shard, run_id, replid, time_ms)` batches to a fresh guard and compares the
    /// verdicts, `None` for accepted and `Some(floor)` for refused.
    fn check(batches: &[(u16, &str, &str, u64)], expected: &[Option<u64>]) {
        let mut guard = Guard::default();
        let verdicts: Vec<Option<u64>> = batches
            .iter()
            .map(|&(shard, run, repl, ms)| match guard.check(shard, &lineage(run, repl), ms) {
                Verdict::Accept => None,
                Verdict::Refuse { floor_ms } => Some(floor_ms),
            })
            .collect();
        assert_eq!(verdicts, expected, "{batches:?}");
    }

    #[test]
    fn one_lineage_is_never_refused_even_when_its_clock_goes_back() {
        // Concurrent calls finish in any order; only a lineage change arms the guard.
        check(&[(1, "a", "r", 10), (1, "a", "r", 12), (1, "a", "r", 11)], &[None, None, None]);
    }

    #[test]
    fn a_restart_refuses_the_seen_milliseconds_then_accepts_later_ones() {
        check(
            &[(1, "a", "r", 10), (1, "a", "r", 20), (1, "b", "s", 15), (1, "b", "s", 20)],
            &[None, None, Some(20), Some(20)],
        );
        check(&[(1, "a", "r", 20), (1, "b", "s", 21), (1, "b", "s", 21)], &[None, None, None]);
    }

    #[test]
    fn either_identifier_counts_as_a_change() {
        // A promoted replica keeps no run_id of the old primary; a restart with persistence
        // may keep the replid but never the run_id.
        check(&[(1, "a", "r", 20), (1, "a", "s", 20)], &[None, Some(20)]);
        check(&[(1, "a", "r", 20), (1, "b", "r", 20)], &[None, Some(20)]);
    }

    #[test]
    fn shards_are_independent() {
        check(&[(1, "a", "r", 20), (2, "b", "s", 5), (1, "a", "r", 21)], &[None, None, None]);
    }

    #[test]
    fn two_lineages_on_one_shard_only_ever_move_forward() {
        // A split brain (or two nodes given one shard ID): every switch raises the floor, so
        // the accepted milliseconds strictly increase across switches.
        check(
            &[
                (7, "a", "r", 100),
                (7, "b", "s", 100),
                (7, "b", "s", 101),
                (7, "a", "r", 101),
                (7, "a", "r", 102),
            ],
            &[None, Some(100), None, Some(101), None],
        );
    }

    #[test]
    fn the_floor_never_goes_down() {
        check(
            &[(1, "a", "r", 50), (1, "b", "s", 10), (1, "c", "t", 10), (1, "c", "t", 51)],
            &[None, Some(50), Some(50), None],
        );
    }
}
