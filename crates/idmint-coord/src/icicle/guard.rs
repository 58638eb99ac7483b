//! The failover guard's bookkeeping, free of I/O: per logical shard, which Redis lineage
//! served it last, the last millisecond seen, and the node's shared mark; it decides whether a
//! batch may be handed out. The client does the network side (reading the lineage and the
//! mark, waiting for a replica, setting the lock).

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
    /// `shared_ms` is the node's shared mark as it stood before this call: the highest
    /// millisecond any idmint client recorded on the node (or on the node it replicates from)
    /// before handing IDs out, 0 when it has none.
    ///
    /// The first batch of a shard, and a batch from another lineage than the shard's last one,
    /// raise the shard's floor to the last millisecond seen and to `shared_ms`; any batch at or
    /// below the floor is refused. Within one lineage the mark is not consulted: icicle's
    /// sequence and lock keep one node's IDs apart. Accepted batches raise the last
    /// millisecond seen.
    pub(crate) fn check(
        &mut self,
        shard: u16,
        lineage: &Lineage,
        time_ms: u64,
        shared_ms: u64,
    ) -> Verdict {
        let record = self.shards.entry(shard).or_insert_with(|| ShardRecord {
            lineage: lineage.clone(),
            seen_ms: 0,
            floor_ms: shared_ms,
        });
        if record.lineage != *lineage {
            record.floor_ms = record.floor_ms.max(record.seen_ms).max(shared_ms);
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

    /// Feeds `(shard, run_id, replid, time_ms)` batches to a fresh guard, on nodes without a
    /// shared mark, and compares the verdicts, `None` for accepted and `Some(floor)` for
    /// refused.
    fn check(batches: &[(u16, &str, &str, u64)], expected: &[Option<u64>]) {
        let marked: Vec<_> = batches.iter().map(|&(s, r, l, ms)| (s, r, l, ms, 0)).collect();
        check_marked(&marked, expected);
    }

    /// As [`check`], each batch with the node's shared mark before the call:
    /// `(shard, run_id, replid, time_ms, shared_ms)`.
    fn check_marked(batches: &[(u16, &str, &str, u64, u64)], expected: &[Option<u64>]) {
        let mut guard = Guard::default();
        let verdicts: Vec<Option<u64>> = batches
            .iter()
            .map(|&(shard, run, repl, ms, shared)| {
                match guard.check(shard, &lineage(run, repl), ms, shared) {
                    Verdict::Accept => None,
                    Verdict::Refuse { floor_ms } => Some(floor_ms),
                }
            })
            .collect();
        assert_eq!(verdicts, expected, "{batches:?}");
    }

    #[test]
    fn a_failover_refuses_up_to_the_shared_mark_not_only_what_this_client_saw() {
        // Another server handed out milliseconds up to 130 on the old primary; this one saw
        // 100. The promoted replica carries the mark (130): this client refuses up to it.
        check_marked(
            &[(1, "a", "r", 100, 90), (1, "b", "s", 120, 130), (1, "b", "s", 131, 130)],
            &[None, Some(130), None],
        );
        // The negative control: without the mark (each server's own guard only), 120 is
        // accepted although another server handed it out.
        check(&[(1, "a", "r", 100), (1, "b", "s", 120)], &[None, None]);
    }

    #[test]
    fn a_first_contact_refuses_up_to_the_shared_mark() {
        // A server that restarted (it remembers nothing) meets a promoted replica whose clock
        // is behind the mark: refused, where without the mark it was accepted.
        check_marked(&[(1, "b", "s", 120, 130), (1, "b", "s", 131, 131)], &[Some(130), None]);
        check_marked(&[(1, "b", "s", 120, 0)], &[None]);
    }

    #[test]
    fn within_one_lineage_the_shared_mark_is_not_consulted() {
        // Other servers' calls raise the mark to this millisecond and past it; icicle's
        // sequence keeps them apart on one node.
        check_marked(
            &[(1, "a", "r", 100, 0), (1, "a", "r", 100, 101), (1, "a", "r", 99, 105)],
            &[None, None, None],
        );
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
