//! The prefetch buffer (after Hazelcast's Flake ID client): the current batch, the batches
//! fetched ahead, and the hand-off between callers and the refill task.
//!
//! Taking an ID is one `arc-swap` load and one `fetch_add` on the batch's cursor: every index
//! of a batch goes to exactly one caller, and a batch is never put back, so no ID is handed
//! out twice. Locks and waiting happen only when the current batch is used up. This module
//! never sends a request: the refill task (in the crate root) does, and delivers here.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

use arc_swap::ArcSwap;
use idmint_core::AnyId;
use tokio::sync::Notify;

use crate::error::{Error, ErrorKind};

/// The IDs of one answer, in the order the server issued them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ids {
    /// IDs of a 64-bit namespace.
    U64(Box<[u64]>),
    /// IDs of a 128-bit namespace.
    U128(Box<[u128]>),
}

impl Ids {
    pub(crate) fn len(&self) -> usize {
        match self {
            Ids::U64(v) => v.len(),
            Ids::U128(v) => v.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ID at `index`, which must be in bounds.
    #[inline(always)]
    fn get(&self, index: usize) -> AnyId {
        match self {
            Ids::U64(v) => AnyId::U64(v[index]),
            Ids::U128(v) => AnyId::U128(v[index]),
        }
    }

    pub(crate) fn first(&self) -> Option<AnyId> {
        (!self.is_empty()).then(|| self.get(0))
    }

    pub(crate) fn last(&self) -> Option<AnyId> {
        self.len().checked_sub(1).map(|i| self.get(i))
    }

    pub(crate) fn into_vec(self) -> Vec<AnyId> {
        match self {
            Ids::U64(v) => v.iter().map(|&id| AnyId::U64(id)).collect(),
            Ids::U128(v) => v.iter().map(|&id| AnyId::U128(id)).collect(),
        }
    }
}

/// A batch being handed out: its IDs and a cursor past the last one taken.
#[derive(Debug)]
struct Batch {
    ids: Ids,
    len: usize,
    /// The next index to hand out; it runs past `len` once the batch is used up.
    cursor: AtomicUsize,
    /// Taking the ID at this index asks for the next batch (the low-water mark); `len` (never
    /// reached) when the low-water mark is 0.
    refill_at: usize,
}

impl Batch {
    fn new(ids: Ids, low_water: usize) -> Self {
        let len = ids.len();
        let refill_at = if low_water == 0 { len } else { len.saturating_sub(low_water) };
        Batch { ids, len, cursor: AtomicUsize::new(0), refill_at }
    }

    fn empty() -> Self {
        Batch::new(Ids::U64(Box::new([])), 0)
    }

    fn remaining(&self) -> usize {
        self.len.saturating_sub(self.cursor.load(Ordering::Relaxed))
    }
}

/// What the callers and the refill task share behind a lock (only on the slow path).
#[derive(Debug, Default)]
struct State {
    /// The batches fetched ahead, in order, waiting for the current one to run out.
    ready: VecDeque<Arc<Batch>>,
    /// How many fetches have finished.
    fetches: u64,
    /// The error of the last fetch, if it failed.
    error: Option<Error>,
    /// Set by `close`: nothing more is handed out.
    closed: bool,
}

/// The prefetch buffer of one client.
#[derive(Debug)]
pub(crate) struct Buffer {
    current: ArcSwap<Batch>,
    state: Mutex<State>,
    /// A fetch has been asked for and has not finished.
    wanted: AtomicBool,
    /// Wakes the refill task.
    want: Notify,
    /// Wakes callers waiting for a fetch to finish.
    fetched: Notify,
    low_water: usize,
}

impl Buffer {
    pub(crate) fn new(low_water: usize) -> Self {
        Buffer {
            current: ArcSwap::from_pointee(Batch::empty()),
            state: Mutex::new(State::default()),
            wanted: AtomicBool::new(false),
            want: Notify::new(),
            fetched: Notify::new(),
            low_water,
        }
    }

    /// The next buffered ID, if there is one: the fast path, with no lock and no waiting.
    /// Taking the ID at the low-water mark asks the refill task for the next batch.
    #[inline(always)]
    pub(crate) fn take(&self) -> Option<AnyId> {
        let batch = self.current.load();
        let index = batch.cursor.fetch_add(1, Ordering::Relaxed);
        if index < batch.len {
            if index == batch.refill_at {
                self.ask_for_refill();
            }
            Some(batch.ids.get(index))
        } else {
            None
        }
    }

    /// Asks the refill task for a batch, unless one is already on its way.
    #[cold]
    fn ask_for_refill(&self) {
        if !self.wanted.swap(true, Ordering::AcqRel) {
            self.want.notify_one();
        }
    }

    /// Waits until the refill task is asked for a batch (for the task).
    pub(crate) async fn wanted(&self) {
        self.want.notified().await;
    }

    /// Whether a batch has been asked for since the last delivery (for the task).
    pub(crate) fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::Acquire)
    }

    /// How many IDs are held: what is left of the current batch plus the batches fetched ahead.
    pub(crate) fn buffered(&self) -> usize {
        self.current.load().remaining() + self.ahead()
    }

    /// How many IDs the batches fetched ahead hold (not the current one).
    pub(crate) fn ahead(&self) -> usize {
        self.lock().ready.iter().map(|b| b.len).sum()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next ID when the fast path found the current batch used up: moves the batch fetched
    /// ahead in, or asks for one and waits. Fails with the error of a fetch that ended while
    /// this call waited, or [`ErrorKind::Closed`].
    #[cold]
    pub(crate) async fn next_slow(&self) -> Result<AnyId, Error> {
        let mut waited_since: Option<u64> = None;
        loop {
            if let Some(id) = self.take() {
                return Ok(id);
            }
            let fetched = self.fetched.notified();
            let mut fetched = std::pin::pin!(fetched);
            // Registered before the state is read, so a delivery after that read wakes us.
            fetched.as_mut().enable();
            {
                let mut state = self.lock();
                if state.closed {
                    return Err(ErrorKind::Closed.into());
                }
                if self.current.load().remaining() > 0 {
                    continue;
                }
                if let Some(batch) = state.ready.pop_front() {
                    self.current.store(batch);
                    continue;
                }
                match waited_since {
                    Some(fetches) if state.fetches != fetches => {
                        if let Some(error) = &state.error {
                            return Err(error.clone());
                        }
                        // A fetch succeeded but others used its batch up: wait for another.
                        waited_since = Some(state.fetches);
                    }
                    Some(_) => {}
                    None => waited_since = Some(state.fetches),
                }
                // Woken even when a refill is already asked for: the task may have taken that
                // request and sent nothing (its limit of IDs waiting was reached then), and
                // nothing else would wake it now that the buffer is empty.
                self.wanted.store(true, Ordering::Release);
                self.want.notify_one();
            }
            fetched.await;
        }
    }

    /// Hands the result of a fetch to the waiting callers (for the refill task). A batch joins
    /// the batches fetched ahead; an error goes to the callers waiting now.
    pub(crate) fn deliver(&self, result: Result<Ids, Error>) {
        {
            let mut state = self.lock();
            state.fetches += 1;
            match result {
                Ok(ids) if !state.closed => {
                    state.error = None;
                    if !ids.is_empty() {
                        state.ready.push_back(Arc::new(Batch::new(ids, self.low_water)));
                    }
                }
                Ok(_) => {}
                Err(error) => state.error = Some(error),
            }
            self.wanted.store(false, Ordering::Release);
        }
        self.fetched.notify_waiters();
    }

    /// Stops handing out IDs: what is buffered is dropped (a gap, never a repeat), and every
    /// caller waiting or arriving gets [`ErrorKind::Closed`].
    pub(crate) fn close(&self) {
        {
            let mut state = self.lock();
            state.closed = true;
            state.ready.clear();
            self.current.store(Arc::new(Batch::empty()));
        }
        self.fetched.notify_waiters();
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn ids(range: std::ops::Range<u64>) -> Ids {
        Ids::U64(range.collect())
    }

    #[test]
    fn the_low_water_mark_asks_for_a_refill_once() {
        let check = |len: u64, low_water: usize, want_refill_after: Option<usize>| {
            let buffer = Buffer::new(low_water);
            buffer.deliver(Ok(ids(0..len)));
            buffer.current.store(buffer.lock().ready.pop_front().unwrap());
            let mut asked = None;
            for taken in 1..=len as usize {
                assert!(buffer.take().is_some());
                if asked.is_none() && buffer.wanted.load(Ordering::Acquire) {
                    asked = Some(taken);
                }
            }
            assert_eq!(buffer.take(), None);
            assert_eq!(asked, want_refill_after, "{len} {low_water}");
        };
        check(10, 3, Some(8));
        check(10, 10, Some(1));
        check(10, 50, Some(1));
        check(10, 0, None);
        check(1, 1, Some(1));
    }

    #[tokio::test]
    async fn batches_are_handed_out_once_in_order() {
        let buffer = Arc::new(Buffer::new(2));
        let refill = {
            let buffer = Arc::clone(&buffer);
            tokio::spawn(async move {
                for start in (0..50).map(|k| k * 10) {
                    buffer.wanted().await;
                    buffer.deliver(Ok(ids(start..start + 10)));
                }
            })
        };
        let mut seen = Vec::new();
        for _ in 0..500 {
            seen.push(buffer.next_slow().await.unwrap());
        }
        refill.await.unwrap();
        let want: Vec<AnyId> = (0..500).map(AnyId::U64).collect();
        assert_eq!(seen, want);
        assert_eq!(buffer.take(), None);
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 500);
    }

    #[tokio::test]
    async fn a_failed_fetch_reaches_the_waiting_caller_then_the_next_one_works() {
        let buffer = Arc::new(Buffer::new(0));
        let refill = {
            let buffer = Arc::clone(&buffer);
            tokio::spawn(async move {
                buffer.wanted().await;
                buffer.deliver(Err(ErrorKind::Closed.into()));
                buffer.wanted().await;
                buffer.deliver(Ok(ids(7..8)));
            })
        };
        assert_eq!(buffer.next_slow().await, Err(ErrorKind::Closed.into()));
        assert_eq!(buffer.next_slow().await, Ok(AnyId::U64(7)));
        refill.await.unwrap();
    }

    #[tokio::test]
    async fn closing_drops_the_buffer_and_wakes_waiters() {
        let buffer = Arc::new(Buffer::new(1));
        buffer.deliver(Ok(ids(0..4)));
        assert_eq!(buffer.buffered(), 4);
        assert_eq!(buffer.next_slow().await, Ok(AnyId::U64(0)));
        assert_eq!(buffer.buffered(), 3);
        buffer.close();
        assert!(buffer.is_closed());
        assert_eq!(buffer.buffered(), 0);
        assert_eq!(buffer.take(), None);
        assert_eq!(buffer.next_slow().await, Err(ErrorKind::Closed.into()));
        buffer.deliver(Ok(ids(10..20)));
        assert_eq!(buffer.next_slow().await, Err(ErrorKind::Closed.into()));
    }

    /// The refill task may take a request and send nothing (its limit of IDs waiting was
    /// reached), leaving the request standing. A caller that then finds the buffer empty must
    /// wake the task again, or both wait for each other for ever (seen in the chaos harness as
    /// a prefetching client that stopped for 25 s while an etcd member was paused).
    #[tokio::test]
    async fn a_caller_that_finds_the_buffer_empty_wakes_the_refill_task_again() {
        let buffer = Arc::new(Buffer::new(1));
        buffer.ask_for_refill();
        // The task takes the request and, at its limit, sends nothing: the request stands.
        buffer.wanted().await;
        assert!(buffer.is_wanted());
        let caller = {
            let buffer = Arc::clone(&buffer);
            tokio::spawn(async move { buffer.next_slow().await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let woken = std::pin::pin!(buffer.wanted());
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(
            woken.poll(&mut context).is_ready(),
            "the waiting caller did not wake the refill task"
        );
        buffer.deliver(Ok(ids(3..4)));
        assert_eq!(caller.await.unwrap(), Ok(AnyId::U64(3)));
    }

    #[test]
    fn ids_convert() {
        let check = |ids: Ids, first: Option<AnyId>, last: Option<AnyId>, len: usize| {
            assert_eq!((ids.first(), ids.last(), ids.len()), (first, last, len));
            assert_eq!(ids.into_vec().len(), len);
        };
        check(Ids::U64(Box::new([])), None, None, 0);
        check(ids(3..6), Some(AnyId::U64(3)), Some(AnyId::U64(5)), 3);
        check(Ids::U128([9].into()), Some(AnyId::U128(9)), Some(AnyId::U128(9)), 1);
    }
}
