//! Precise waits for the next tick: one clock thread that sleeps until the earliest instant a
//! request waits for and wakes it there, so that a namespace whose tick is used up resumes
//! within microseconds of the next tick instead of a whole timer-wheel millisecond later.
//!
//! Why a thread: tokio's timer has a resolution of 1 ms and rounds up, so a request that used
//! up its tick 0.2 ms before the next one slept 1–2 ms, and a namespace at full rate idled
//! through about half of its milliseconds. A thread blocked on a condition variable with a
//! timeout wakes within tens of microseconds of the deadline (the kernel's timer slack), and
//! costs nothing while nobody waits: it blocks without a timeout until a waiter arrives, and
//! it is only started by the first wait.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError},
    time::Instant,
};

use tokio::sync::oneshot;

/// The clock thread of one server and the waits it holds.
#[derive(Debug, Default)]
pub(crate) struct Ticker {
    inner: Arc<Inner>,
    /// Whether the thread runs; `false` if it could not be started (waits then fall back to
    /// tokio's timer).
    started: OnceLock<bool>,
}

#[derive(Debug, Default)]
struct Inner {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    waiters: BinaryHeap<Reverse<Waiter>>,
    /// Orders waiters with the same instant, so that the heap never compares senders.
    next_seq: u64,
    closed: bool,
}

#[derive(Debug)]
struct Waiter {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Waiter {}

impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiter {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue holds no invariant a panic could break halfway.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread: wakes every waiter whose instant has come, then sleeps until the next
    /// one (or until a waiter arrives), until the ticker is dropped.
    fn run(&self) {
        let mut queue = self.lock();
        loop {
            if queue.closed {
                return;
            }
            let now = Instant::now();
            while queue.waiters.peek().is_some_and(|Reverse(w)| w.at <= now) {
                if let Some(Reverse(waiter)) = queue.waiters.pop() {
                    // A waiter that was dropped (its request cancelled) has nobody to wake.
                    let _ = waiter.wake.send(());
                }
            }
            queue = match queue.waiters.peek() {
                None => self.wake.wait(queue).unwrap_or_else(PoisonError::into_inner),
                Some(Reverse(first)) => {
                    let timeout = first.at.saturating_duration_since(now);
                    self.wake.wait_timeout(queue, timeout).unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
    }
}

impl Ticker {
    /// Waits until `at`, to within the kernel's timer slack (tens of microseconds) when the
    /// clock thread runs, else with tokio's timer. Under tokio's paused test clock, which is
    /// not the thread's clock, it finishes with tokio's timer, so virtual time still moves.
    pub(crate) async fn wait_until(&self, at: tokio::time::Instant) {
        if self.start() {
            let (wake, woken) = oneshot::channel();
            {
                let mut queue = self.inner.lock();
                let seq = queue.next_seq;
                queue.next_seq += 1;
                let first = queue.waiters.peek().is_none_or(|Reverse(w)| at.into_std() < w.at);
                queue.waiters.push(Reverse(Waiter { at: at.into_std(), seq, wake }));
                if first {
                    self.inner.wake.notify_one();
                }
            }
            // The sender is dropped only by a closed ticker: then the timer below finishes.
            let _ = woken.await;
        }
        if tokio::time::Instant::now() < at {
            tokio::time::sleep_until(at).await;
        }
    }

    /// Starts the thread on first use; whether it runs.
    fn start(&self) -> bool {
        *self.started.get_or_init(|| {
            let inner = Arc::clone(&self.inner);
            std::thread::Builder::new()
                .name("idmint-ticker".into())
                .spawn(move || inner.run())
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "cannot start the clock thread; waits use tokio's 1 ms timer");
                })
                .is_ok()
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        let mut queue = self.inner.lock();
        queue.closed = true;
        queue.waiters.clear();
        self.inner.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Ticker;

    /// Waiters wake at or after their instant, in order, and within a few milliseconds of it
    /// even on a loaded machine (the bound is loose on purpose: this checks that the thread
    /// wakes them, not how precisely; BENCHMARKS.md measures that).
    #[tokio::test]
    async fn waiters_wake_at_their_instants() {
        let ticker = std::sync::Arc::new(Ticker::default());
        let base = tokio::time::Instant::now();
        let offsets = [3_u64, 1, 2, 2, 5];
        let tasks: Vec<_> = offsets
            .iter()
            .map(|&ms| {
                let ticker = std::sync::Arc::clone(&ticker);
                tokio::spawn(async move {
                    let at = base + Duration::from_millis(ms);
                    ticker.wait_until(at).await;
                    tokio::time::Instant::now().duration_since(at)
                })
            })
            .collect();
        for (task, ms) in tasks.into_iter().zip(offsets) {
            let late = task.await.expect("the waiter finishes");
            assert!(late < Duration::from_millis(50), "woke {late:?} after {ms} ms");
        }
    }

    /// A dropped ticker stops its thread and releases every waiter to the timer.
    #[tokio::test]
    async fn a_dropped_ticker_stops_its_thread() {
        let ticker = Ticker::default();
        ticker.wait_until(tokio::time::Instant::now() + Duration::from_millis(1)).await;
        let inner = std::sync::Arc::clone(&ticker.inner);
        drop(ticker);
        for _ in 0..1_000 {
            if std::sync::Arc::strong_count(&inner) == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("the clock thread still holds the ticker");
    }
}
