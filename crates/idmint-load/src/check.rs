//! What every load mode keeps while it runs: latencies (exact percentiles from every sample)
//! and the IDs it received, as runs of consecutive values, so that "every ID distinct" is
//! checked exactly at the end without a set of every ID.

use std::time::Duration;

use serde::Serialize;

/// Latency samples in nanoseconds. Every sample is kept (a few MB for millions of requests),
/// so the percentiles are exact, not estimated.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    samples: Vec<u64>,
}

impl Latencies {
    /// Adds one sample.
    pub fn record(&mut self, latency: Duration) {
        self.samples.push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Adds the samples of `other`.
    pub fn merge(&mut self, other: Latencies) {
        self.samples.extend(other.samples);
    }

    /// Sorts the samples and reads the percentiles off them (nearest rank).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use idmint_load::Latencies;
    ///
    /// let mut latencies = Latencies::default();
    /// for us in 1..=100 {
    ///     latencies.record(Duration::from_micros(us));
    /// }
    /// let summary = latencies.summary();
    /// assert_eq!((summary.p50_us, summary.p99_us, summary.max_us), (50.0, 99.0, 100.0));
    /// ```
    pub fn summary(mut self) -> LatencySummary {
        self.samples.sort_unstable();
        let n = self.samples.len();
        let at = |p: f64| -> f64 {
            if n == 0 {
                return 0.0;
            }
            // Nearest rank: the smallest sample with at least p of all samples at or below it.
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            self.samples[rank - 1] as f64 / 1e3
        };
        let mean = if n == 0 {
            0.0
        } else {
            self.samples.iter().map(|&s| s as f64).sum::<f64>() / n as f64 / 1e3
        };
        LatencySummary {
            samples: n as u64,
            mean_us: mean,
            p50_us: at(0.50),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: at(1.0),
        }
    }
}

/// Percentiles of a set of latencies, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// How many samples.
    pub samples: u64,
    /// The mean.
    pub mean_us: f64,
    /// The median.
    pub p50_us: f64,
    /// The 99th percentile.
    pub p99_us: f64,
    /// The 99.9th percentile.
    pub p999_us: f64,
    /// The largest sample.
    pub max_us: f64,
}

/// The IDs one source (a connection, a stream) received, kept as runs of consecutive values:
/// a batch of a snowflake layout is one run, so millions of IDs take a few bytes. Also checks
/// the order, when the source promises increasing IDs.
///
/// # Example
///
/// ```
/// use idmint_load::IdRuns;
///
/// let mut a = IdRuns::increasing();
/// a.push_all(&[10, 11, 12, 20]);
/// let mut b = IdRuns::increasing();
/// b.push_all(&[13, 14]);
/// let distinct = IdRuns::check([a, b]);
/// assert_eq!((distinct.ids, distinct.runs, distinct.duplicates), (6, 3, 0));
///
/// let mut c = IdRuns::unordered();
/// c.push_all(&[12, 30]);
/// assert_eq!(IdRuns::check([c, IdRuns::unordered()]).duplicates, 0);
/// ```
#[derive(Debug, Clone)]
pub struct IdRuns {
    /// Inclusive ranges `(first, last)`, in the order received.
    runs: Vec<(u64, u64)>,
    ids: u64,
    /// The last ID received, when the order is checked.
    last: Option<u64>,
    ordered: bool,
    out_of_order: u64,
}

impl IdRuns {
    /// For a source whose IDs must strictly increase (one idmint connection or stream).
    pub fn increasing() -> Self {
        IdRuns { runs: Vec::new(), ids: 0, last: None, ordered: true, out_of_order: 0 }
    }

    /// For a source that promises no order between its messages (ferroid-tonic-server's
    /// stream interleaves its workers).
    pub fn unordered() -> Self {
        IdRuns { ordered: false, ..IdRuns::increasing() }
    }

    /// Adds one ID.
    #[inline]
    pub fn push(&mut self, id: u64) {
        self.ids += 1;
        if self.ordered {
            if self.last.is_some_and(|last| id <= last) {
                self.out_of_order += 1;
            }
            self.last = Some(id);
        }
        if let Some(run) = self.runs.last_mut()
            && run.1.checked_add(1) == Some(id)
        {
            run.1 = id;
            return;
        }
        self.runs.push((id, id));
    }

    /// Adds IDs in the order received. A slice of consecutive values (a batch from one tick)
    /// is recognised in one branch-free pass and added as one run, so that checking costs
    /// the load client well under a nanosecond per ID.
    pub fn push_all(&mut self, ids: &[u64]) {
        let (Some(&first), Some(&last)) = (ids.first(), ids.last()) else { return };
        if !consecutive(ids) {
            for &id in ids {
                self.push(id);
            }
            return;
        }
        // The same as pushing each ID: `first` is checked against what came before and may
        // extend the last run; the rest extend it.
        self.push(first);
        let run = self.runs.last_mut().expect("push made a run");
        run.1 = last;
        self.ids += ids.len() as u64 - 1;
        if self.ordered {
            self.last = Some(last);
        }
    }

    /// Adds the IDs of one message that must strictly increase by itself, even when the
    /// source promises no order between messages. Returns false (and keeps nothing) if they
    /// do not.
    pub fn push_increasing_message(&mut self, ids: &[u64]) -> bool {
        if !consecutive(ids) && !ids.windows(2).all(|w| w[0] < w[1]) {
            self.out_of_order += 1;
            return false;
        }
        self.push_all(ids);
        true
    }

    /// How many IDs were added.
    pub fn ids(&self) -> u64 {
        self.ids
    }

    /// How many IDs broke the order (or how many messages were not increasing by themselves).
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// Checks that no ID was received twice, across every source: sorts every run by its
    /// first ID and counts the values that two runs share.
    pub fn check(sources: impl IntoIterator<Item = IdRuns>) -> Distinct {
        let mut runs = Vec::new();
        let mut ids = 0u64;
        let mut out_of_order = 0u64;
        for source in sources {
            ids += source.ids;
            out_of_order += source.out_of_order;
            runs.extend(source.runs);
        }
        runs.sort_unstable();
        let mut duplicates = 0u64;
        let mut covered = 0u64;
        let mut end: Option<u64> = None;
        for &(first, last) in &runs {
            covered += last - first + 1;
            if let Some(end) = end
                && first <= end
            {
                duplicates += last.min(end) - first + 1;
            }
            end = Some(end.map_or(last, |end| end.max(last)));
        }
        debug_assert_eq!(covered, ids, "the runs hold every ID added");
        Distinct { ids, runs: runs.len() as u64, duplicates, out_of_order }
    }
}

/// Whether every ID is one more than the one before it (true for 0 or 1 IDs). No early
/// exit, so that the compiler can vectorise it.
fn consecutive(ids: &[u64]) -> bool {
    let Some(rest) = ids.get(1..) else { return true };
    let steps_of_one =
        ids.iter().zip(rest).fold(0u64, |bad, (a, b)| bad | (b.wrapping_sub(*a) ^ 1)) == 0;
    // Steps of one that wrap from u64::MAX to 0 end below where they started.
    steps_of_one && ids[0] <= ids[ids.len() - 1]
}

/// Whether the IDs of a run were distinct (and in order where promised).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Distinct {
    /// Every ID received, warm-up included.
    pub ids: u64,
    /// Runs of consecutive values they form.
    pub runs: u64,
    /// IDs received more than once (0 when every ID is distinct).
    pub duplicates: u64,
    /// IDs that did not increase where the source promised they would.
    pub out_of_order: u64,
}

impl Distinct {
    /// Every ID distinct and in the promised order.
    pub fn ok(&self) -> bool {
        self.duplicates == 0 && self.out_of_order == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_counted_across_sources() {
        let mut a = IdRuns::increasing();
        a.push_all(&[1, 2, 3, 4, 10]);
        let mut b = IdRuns::increasing();
        b.push_all(&[3, 4, 5, 10]);
        let distinct = IdRuns::check([a, b]);
        assert_eq!(distinct.ids, 9);
        assert_eq!(distinct.duplicates, 3, "3, 4 and 10 twice");
        assert!(!distinct.ok());
    }

    #[test]
    fn order_is_checked_only_where_promised() {
        let mut a = IdRuns::increasing();
        a.push_all(&[5, 4]);
        assert_eq!(a.out_of_order(), 1);
        let mut b = IdRuns::unordered();
        b.push_all(&[5, 4]);
        assert!(b.push_increasing_message(&[7, 8]));
        assert!(!b.push_increasing_message(&[9, 9]));
        assert_eq!(b.out_of_order(), 1);
        assert_eq!(IdRuns::check([b]).ids, 4);
    }

    #[test]
    fn slices_count_like_single_pushes() {
        let slices: [&[u64]; 6] = [&[5, 6, 7], &[8, 9], &[9, 10], &[20, 22], &[], &[u64::MAX]];
        let mut by_slice = IdRuns::increasing();
        let mut by_id = IdRuns::increasing();
        for slice in slices {
            by_slice.push_all(slice);
            for &id in slice {
                by_id.push(id);
            }
        }
        assert_eq!(by_slice.runs, by_id.runs);
        assert_eq!((by_slice.ids, by_slice.out_of_order), (by_id.ids, by_id.out_of_order));
        assert_eq!(by_slice.out_of_order, 1, "9 after 9");
        assert_eq!(IdRuns::check([by_slice]).duplicates, 1);
        assert!(consecutive(&[]) && consecutive(&[3]) && consecutive(&[3, 4, 5]));
        assert!(!consecutive(&[3, 5]) && !consecutive(&[4, 3]) && !consecutive(&[u64::MAX, 0]));
    }

    #[test]
    fn runs_merge_consecutive_ids() {
        let mut a = IdRuns::increasing();
        a.push_all(&(100..10_100).collect::<Vec<_>>());
        a.push(u64::MAX);
        let distinct = IdRuns::check([a]);
        assert_eq!((distinct.ids, distinct.runs, distinct.duplicates), (10_001, 2, 0));
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let mut latencies = Latencies::default();
        for ns in [5_000, 1_000, 3_000, 2_000, 4_000] {
            latencies.record(Duration::from_nanos(ns));
        }
        let s = latencies.summary();
        assert_eq!((s.samples, s.p50_us, s.p99_us, s.max_us, s.mean_us), (5, 3.0, 5.0, 5.0, 3.0));
        assert_eq!(Latencies::default().summary().p99_us, 0.0);
    }
}
