//! [`SegmentAllocator`]: serves IDs from ranges of a [`SegmentStore`], with one atomic add per
//! ID on the hot path, the next range fetched in the background (double buffering) and a range
//! length that adapts to the rate of use (Leaf-segment's rule). It never sleeps and never reads
//! the clock on the hot path.

use std::{
    fmt,
    ops::Range,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use idmint_core::Clock;

use crate::{Error, SegmentStore, segment::MAX_SEGMENT_ID};

/// The largest step (and batch) an allocator uses: 2^40 IDs, far more than any sane range,
/// and small enough that the atomic cursor can never overflow.
const MAX_STEP: u64 = 1 << 40;

/// How a [`SegmentAllocator`] sizes ranges and when it fetches the next one. Build it with
/// struct-update syntax from [`SegmentOptions::default`].
///
/// **Step rule** (Meituan's Leaf-segment's): the first range has `initial_step` IDs. Each
/// later fetch looks at how long it has been since the previous fetch, which with double
/// buffering is about how long one range lasted:
///
/// | time since the previous fetch | next step |
/// | --- | --- |
/// | less than `target` | doubled, at most `max_step` |
/// | `target` to `2 × target` | unchanged |
/// | more than `2 × target` | halved, at least `min_step` |
///
/// So a busy namespace makes few store round trips (one per `max_step` IDs at most), and a
/// quiet one wastes little on a crash (at most the two ranges held, see
/// [`SegmentAllocator`]).
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use idmint_coord::SegmentOptions;
///
/// // A fixed step of 100: no adaptation.
/// let fixed = SegmentOptions { initial_step: 100, min_step: 100, max_step: 100, ..SegmentOptions::default() };
/// assert_eq!(fixed.prefetch_percent, 15);
/// assert_eq!(SegmentOptions::default().target, Duration::from_secs(15 * 60));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentOptions {
    /// The length of the first range. Default 1,000.
    pub initial_step: u64,
    /// The shortest range after halving. Default 1,000 (Leaf's floor is its configured step).
    pub min_step: u64,
    /// The longest range after doubling. Default 1,000,000 (Leaf's cap). At most 2^40.
    pub max_step: u64,
    /// How long a range should last. Default 15 minutes (Leaf's figure).
    pub target: Duration,
    /// When this share of the current range (in percent, 1 to 99) has been handed out, the
    /// next range is fetched in the background. Default 15: between Leaf's 10 % and Tinyid's
    /// 20 %, which leaves 85 % of a range (a quarter hour's worth at the target rate) for the
    /// fetch to finish before anyone waits, and still holds at most two ranges.
    pub prefetch_percent: u8,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            initial_step: 1_000,
            min_step: 1_000,
            max_step: 1_000_000,
            target: Duration::from_secs(15 * 60),
            prefetch_percent: 15,
        }
    }
}

impl SegmentOptions {
    fn check(&self) -> Result<(), Error> {
        let invalid = |reason: String| Err(Error::InvalidRequest(reason));
        if !(1 <= self.min_step
            && self.min_step <= self.initial_step
            && self.initial_step <= self.max_step
            && self.max_step <= MAX_STEP)
        {
            return invalid(format!(
                "segment steps must satisfy 1 <= min_step ({}) <= initial_step ({}) <= max_step ({}) <= {MAX_STEP}",
                self.min_step, self.initial_step, self.max_step
            ));
        }
        if self.target.is_zero() {
            return invalid("the segment target duration must not be zero".into());
        }
        if !(1..=99).contains(&self.prefetch_percent) {
            return invalid(format!(
                "the segment prefetch point must be 1 to 99 percent, not {}",
                self.prefetch_percent
            ));
        }
        Ok(())
    }

    /// The step after one that lasted `lasted` (the table above).
    fn next_step(&self, step: u64, lasted: Duration) -> u64 {
        if lasted < self.target {
            step.saturating_mul(2).min(self.max_step)
        } else if lasted > self.target.saturating_mul(2) {
            (step / 2).max(self.min_step)
        } else {
            step
        }
    }
}

/// What an allocator has done so far, for metrics and tests.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::{MemoryStore, SegmentAllocator, SegmentOptions};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let ids = SegmentAllocator::new(Arc::new(MemoryStore::new()), "doc", SegmentOptions::default())?;
/// ids.next().await?;
/// let stats = ids.stats();
/// assert_eq!((stats.fetches, stats.waits, stats.step), (1, 1, 1_000));
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentStats {
    /// Ranges fetched from the store: one store call (for Postgres, one round trip) each.
    pub fetches: u64,
    /// Of those, fetched ahead in the background.
    pub background_fetches: u64,
    /// Store calls that failed (the next call tries again).
    pub failed_fetches: u64,
    /// Times a caller found the current range used up and had to wait for the store (the
    /// first call always does; afterwards, only when the background fetch was not ahead).
    pub waits: u64,
    /// The length of the last range fetched (0 before the first).
    pub step: u64,
}

/// Fully monotonic IDs of one namespace from a [`SegmentStore`], per process.
///
/// - **Hot path**: the current range is an `ArcSwap`ped segment with an atomic cursor; an ID
///   is one `fetch_add` (a batch too). No lock, no clock, no allocation.
/// - **Double buffering**: when an ID at or past
///   [`prefetch_percent`](SegmentOptions::prefetch_percent) of the current range is handed out,
///   a background task fetches the next range, so callers normally never wait for the store.
///   When the current range runs out, the next one (waiting for it if its fetch is still in
///   flight, fetching it if there is none) replaces it, under an async mutex that serialises
///   every fetch.
/// - **Adaptive step**: see [`SegmentOptions`].
///
/// IDs are increasing across all tasks and threads of the process: an ID returned after
/// another was returned is larger. (The store's ranges increase; a range replaces the current
/// one only once its cursor has passed its end, so no late caller can take an ID from it.)
/// Several processes on one namespace get disjoint IDs, each increasing, interleaved with one
/// another. At most two ranges are held at any time, so a crash (`kill -9`) wastes at most the
/// rest of the current range plus the range fetched ahead: a gap, never a duplicate.
///
/// Call [`next`](Self::next) and [`next_batch`](Self::next_batch) from a tokio runtime: the
/// background fetch is a `tokio::spawn`ed task. On a current-thread runtime it runs only when
/// the caller yields, so a task that takes IDs in a loop without ever awaiting anything else
/// fetches every range itself (`stats().waits` shows it); a multi-thread runtime fetches
/// ahead on another worker.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::{MemoryStore, SegmentAllocator, SegmentOptions};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let options = SegmentOptions { initial_step: 10, min_step: 10, max_step: 10, ..SegmentOptions::default() };
/// let ids = SegmentAllocator::new(store.clone(), "orders", options.clone())?;
/// assert_eq!(ids.next().await?, 1);
/// assert_eq!(ids.next_batch(5).await?, 2..7);
///
/// // A second process on the same store gets ranges of its own.
/// let other = SegmentAllocator::new(store, "orders", options)?;
/// assert!(other.next().await? > 10);
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
pub struct SegmentAllocator {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn SegmentStore>,
    namespace: String,
    options: SegmentOptions,
    clock: Arc<dyn Clock + Send + Sync>,
    /// The range IDs are taken from now.
    current: ArcSwap<Segment>,
    /// Serialises fetches and holds the range fetched ahead.
    slow: tokio::sync::Mutex<Slow>,
    fetches: AtomicU64,
    background_fetches: AtomicU64,
    failed_fetches: AtomicU64,
    waits: AtomicU64,
    step: AtomicU64,
}

/// One range being handed out.
#[derive(Debug)]
struct Segment {
    /// The next ID to hand out; at or past `end` when used up (callers may push it further).
    cursor: AtomicU64,
    end: u64,
    /// Handing out this ID (or a later one) starts the background fetch.
    prefetch_at: u64,
    /// Whether the background fetch was started for this range.
    prefetch_started: AtomicBool,
}

impl Segment {
    fn new(range: Range<u64>, percent: u8) -> Self {
        let len = range.end - range.start;
        let used = (u128::from(len) * u128::from(percent) / 100) as u64;
        Segment {
            cursor: AtomicU64::new(range.start),
            end: range.end,
            prefetch_at: range.start + used.max(1).min(len.saturating_sub(1)),
            prefetch_started: AtomicBool::new(false),
        }
    }

    /// Before the first fetch: used up.
    fn empty() -> Self {
        Segment {
            cursor: AtomicU64::new(0),
            end: 0,
            prefetch_at: 0,
            prefetch_started: AtomicBool::new(true),
        }
    }
}

/// The state behind the mutex.
#[derive(Debug)]
struct Slow {
    /// The range fetched ahead, not yet handed out from.
    next: Option<Range<u64>>,
    /// The step of the last fetch.
    step: u64,
    /// When the last fetch started (clock ms), `None` before the first.
    last_fetch_ms: Option<u64>,
    /// The end of the last range fetched: the store must continue above it.
    last_end: u64,
}

/// The default clock for the step rule: monotonic milliseconds since the allocator started, so
/// wall-clock steps cannot fake a fast or slow range.
#[derive(Debug)]
struct Monotonic(Instant);

impl Clock for Monotonic {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

impl fmt::Debug for SegmentAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentAllocator")
            .field("store", &self.inner.store.name())
            .field("namespace", &self.inner.namespace)
            .field("options", &self.inner.options)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl SegmentAllocator {
    /// An allocator of `namespace`'s IDs from `store`. It fetches nothing until the first ID
    /// is asked for.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an invalid namespace or inconsistent options.
    pub fn new(
        store: Arc<dyn SegmentStore>,
        namespace: &str,
        options: SegmentOptions,
    ) -> Result<Self, Error> {
        Self::with_clock(store, namespace, options, Arc::new(Monotonic(Instant::now())))
    }

    /// The same, with the clock the step rule reads (at each fetch, never on the hot path),
    /// for tests that drive it by hand (`idmint_core::ManualClock`).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::{MemoryStore, SegmentAllocator, SegmentOptions};
    /// use idmint_core::ManualClock;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let clock = Arc::new(ManualClock::new(0));
    /// let options = SegmentOptions { initial_step: 10, min_step: 10, max_step: 80, ..SegmentOptions::default() };
    /// let ids = SegmentAllocator::with_clock(Arc::new(MemoryStore::new()), "doc", options, clock.clone())?;
    /// ids.next_batch(10).await?; // the first range, 1..11
    /// clock.advance(1_000); // one second later, far below the 15-minute target
    /// ids.next().await?; // the next range is twice as long
    /// assert_eq!(ids.stats().step, 20);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn with_clock(
        store: Arc<dyn SegmentStore>,
        namespace: &str,
        options: SegmentOptions,
        clock: Arc<dyn Clock + Send + Sync>,
    ) -> Result<Self, Error> {
        crate::segment::check_name("segment namespace", namespace)?;
        options.check()?;
        let slow =
            Slow { next: None, step: options.initial_step, last_fetch_ms: None, last_end: 1 };
        Ok(SegmentAllocator {
            inner: Arc::new(Inner {
                store,
                namespace: namespace.to_owned(),
                options,
                clock,
                current: ArcSwap::from_pointee(Segment::empty()),
                slow: tokio::sync::Mutex::new(slow),
                fetches: AtomicU64::new(0),
                background_fetches: AtomicU64::new(0),
                failed_fetches: AtomicU64::new(0),
                waits: AtomicU64::new(0),
                step: AtomicU64::new(0),
            }),
        })
    }

    /// The next ID: larger than every ID this allocator returned before.
    ///
    /// # Errors
    ///
    /// The store's error when the current range is used up and the next one cannot be
    /// fetched ([`Error::Exhausted`] at the end of the ID space, [`Error::Unavailable`], …).
    /// Nothing is lost: the next call fetches again.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, when it starts the background fetch.
    pub async fn next(&self) -> Result<u64, Error> {
        loop {
            let segment = self.inner.current.load();
            let id = segment.cursor.fetch_add(1, Ordering::Relaxed);
            if id < segment.end {
                if id >= segment.prefetch_at {
                    self.inner.prefetch_once(&segment);
                }
                return Ok(id);
            }
            let used_up = arc_swap::Guard::into_inner(segment);
            self.inner.refill(&used_up).await?;
        }
    }

    /// Up to `n` consecutive IDs, as a half-open range: all `n`, or fewer when the current
    /// range ends first (never none). Every ID in it is larger than every ID returned before.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for `n == 0`; otherwise as [`next`](Self::next).
    ///
    /// # Panics
    ///
    /// As [`next`](Self::next).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::{MemoryStore, SegmentAllocator, SegmentOptions};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let options = SegmentOptions { initial_step: 10, min_step: 10, max_step: 10, ..SegmentOptions::default() };
    /// let ids = SegmentAllocator::new(Arc::new(MemoryStore::new()), "doc", options)?;
    /// assert_eq!(ids.next_batch(8).await?, 1..9);
    /// assert_eq!(ids.next_batch(8).await?, 9..11); // the rest of the first range
    /// assert_eq!(ids.next_batch(8).await?, 11..19);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn next_batch(&self, n: u64) -> Result<Range<u64>, Error> {
        if n == 0 {
            return Err(Error::InvalidRequest("a batch must ask for at least one id".into()));
        }
        let n = n.min(MAX_STEP);
        loop {
            let segment = self.inner.current.load();
            let first = segment.cursor.fetch_add(n, Ordering::Relaxed);
            if first < segment.end {
                let end = (first + n).min(segment.end);
                if end > segment.prefetch_at {
                    self.inner.prefetch_once(&segment);
                }
                return Ok(first..end);
            }
            let used_up = arc_swap::Guard::into_inner(segment);
            self.inner.refill(&used_up).await?;
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The options in use.
    pub fn options(&self) -> &SegmentOptions {
        &self.inner.options
    }

    /// What the allocator has done so far.
    pub fn stats(&self) -> SegmentStats {
        let inner = &self.inner;
        SegmentStats {
            fetches: inner.fetches.load(Ordering::Relaxed),
            background_fetches: inner.background_fetches.load(Ordering::Relaxed),
            failed_fetches: inner.failed_fetches.load(Ordering::Relaxed),
            waits: inner.waits.load(Ordering::Relaxed),
            step: inner.step.load(Ordering::Relaxed),
        }
    }
}

impl Inner {
    /// Starts the background fetch of the range after `segment`, once per segment.
    fn prefetch_once(self: &Arc<Self>, segment: &Arc<Segment>) {
        if segment.prefetch_started.load(Ordering::Relaxed)
            || segment.prefetch_started.swap(true, Ordering::AcqRel)
        {
            return;
        }
        self.spawn_prefetch(Arc::clone(segment));
    }

    #[cold]
    fn spawn_prefetch(self: &Arc<Self>, segment: Arc<Segment>) {
        let inner = Arc::clone(self);
        tokio::spawn(async move {
            let mut slow = inner.slow.lock().await;
            // Nothing to do when a range is already waiting, or when `segment` was used up
            // and replaced meanwhile (its successor starts its own prefetch).
            if slow.next.is_some() || !Arc::ptr_eq(&inner.current.load(), &segment) {
                return;
            }
            // A failure is counted; the caller that finds the range used up fetches again.
            if let Ok(range) = inner.fetch(&mut slow).await {
                inner.background_fetches.fetch_add(1, Ordering::Relaxed);
                slow.next = Some(range);
            }
        });
    }

    /// Replaces the used-up `used_up` with the next range, unless another caller already did.
    #[cold]
    async fn refill(self: &Arc<Self>, used_up: &Arc<Segment>) -> Result<(), Error> {
        let (mut slow, contended) = match self.slow.try_lock() {
            Ok(slow) => (slow, false),
            Err(_) => (self.slow.lock().await, true),
        };
        if !Arc::ptr_eq(&self.current.load(), used_up) {
            return Ok(());
        }
        let range = match slow.next.take() {
            Some(range) => {
                if contended {
                    // We waited for a fetch that was still in flight.
                    self.waits.fetch_add(1, Ordering::Relaxed);
                }
                range
            }
            None => {
                self.waits.fetch_add(1, Ordering::Relaxed);
                self.fetch(&mut slow).await?
            }
        };
        self.current.store(Arc::new(Segment::new(range, self.options.prefetch_percent)));
        Ok(())
    }

    /// One store call, with the step rule applied and the store's answer checked.
    async fn fetch(&self, slow: &mut Slow) -> Result<Range<u64>, Error> {
        let now = self.clock.now_ms();
        let step = match slow.last_fetch_ms {
            None => self.options.initial_step,
            Some(last) => {
                self.options.next_step(slow.step, Duration::from_millis(now.saturating_sub(last)))
            }
        };
        let range = match self.store.next_range(&self.namespace, step).await {
            Ok(range) => range,
            Err(e) => {
                self.failed_fetches.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        // A tripwire, like PD's client-side fallback check: a store that breaks its contract
        // must not make us hand out an ID twice.
        if range.start < slow.last_end
            || range.end.checked_sub(range.start) != Some(step)
            || range.end > MAX_SEGMENT_ID + 1
        {
            self.failed_fetches.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Corrupt {
                path: format!(
                    "{} segment store, namespace `{}`",
                    self.store.name(),
                    self.namespace
                ),
                reason: format!(
                    "asked for {step} ids after {}, got {}..{}",
                    slow.last_end - 1,
                    range.start,
                    range.end
                ),
            });
        }
        slow.step = step;
        slow.last_fetch_ms = Some(now);
        slow.last_end = range.end;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        self.step.store(step, Ordering::Relaxed);
        Ok(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(step: u64, lasted_s: u64, expected: u64) {
        let options = SegmentOptions {
            initial_step: 100,
            min_step: 100,
            max_step: 800,
            target: Duration::from_secs(10),
            prefetch_percent: 15,
        };
        let got = options.next_step(step, Duration::from_secs(lasted_s));
        assert_eq!(got, expected, "step {step} after a range that lasted {lasted_s} s");
    }

    #[test]
    fn the_step_doubles_when_fast_halves_when_slow_within_bounds() {
        check(100, 0, 200);
        check(100, 9, 200);
        check(400, 9, 800);
        check(800, 1, 800);
        check(400, 10, 400);
        check(400, 20, 400);
        check(400, 21, 200);
        check(200, 3_600, 100);
        check(100, 3_600, 100);
    }

    #[test]
    fn the_prefetch_point_lies_inside_the_range() {
        let at = |range: Range<u64>, percent| Segment::new(range, percent).prefetch_at;
        assert_eq!(at(1..101, 15), 16);
        assert_eq!(at(1..1_000_001, 15), 150_001);
        assert_eq!(at(5..6, 15), 5);
        assert_eq!(at(5..7, 99), 6);
        assert_eq!(at(1..11, 1), 2);
    }

    #[test]
    fn inconsistent_options_are_refused() {
        let base = SegmentOptions::default();
        for bad in [
            SegmentOptions { min_step: 0, ..base.clone() },
            SegmentOptions { initial_step: 10, ..base.clone() },
            SegmentOptions { max_step: 100, ..base.clone() },
            SegmentOptions { max_step: MAX_STEP + 1, ..base.clone() },
            SegmentOptions { target: Duration::ZERO, ..base.clone() },
            SegmentOptions { prefetch_percent: 0, ..base.clone() },
            SegmentOptions { prefetch_percent: 100, ..base.clone() },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(base.check().is_ok());
    }
}
