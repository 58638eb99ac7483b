//! [`Tally`]: a counter that many threads add to without a locked instruction: each thread that
//! counts holds a slot of its own ([`TallySlot`], one writer, a plain load and store), and a
//! reader sums the slots. A slot given back (its thread ended, or moved on to another
//! namespace) keeps its count and goes to the next thread that asks, so the slots are as many
//! as the threads that ever counted at the same time.

use std::{
    cell::Cell,
    marker::PhantomData,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
};

/// One slot's count, on a cache line of its own so that two threads' slots never share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

/// Every slot of a tally, and those no thread holds now.
#[derive(Debug, Default)]
struct Slots {
    all: Vec<Arc<Padded>>,
    free: Vec<Arc<Padded>>,
}

/// A counter summed over single-writer slots.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    slots: Mutex<Slots>,
}

impl Tally {
    /// A slot for the calling thread to count into: a free one (with the count it holds), or a
    /// new one.
    pub(crate) fn slot(self: &Arc<Self>) -> TallySlot {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots.free.pop().unwrap_or_else(|| {
            let slot = Arc::new(Padded::default());
            slots.all.push(Arc::clone(&slot));
            slot
        });
        TallySlot { slot, home: Arc::clone(self), one_thread: PhantomData }
    }

    /// The count: the sum of every slot, held or free.
    pub(crate) fn sum(&self) -> u64 {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.all.iter().fold(0, |sum, slot| sum.wrapping_add(slot.0.load(Relaxed)))
    }
}

/// One thread's slot of a [`Tally`]: only its holder writes it, so an add is a plain load and
/// store. Not `Sync` (two threads adding through one slot would lose counts); dropping it
/// gives the slot back, under the tally's lock, which orders the last add before the next
/// holder's first.
#[derive(Debug)]
pub(crate) struct TallySlot {
    slot: Arc<Padded>,
    home: Arc<Tally>,
    one_thread: PhantomData<Cell<()>>,
}

impl TallySlot {
    /// Adds `n` to the slot.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        let count = &self.slot.0;
        count.store(count.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Whether this is a slot of `tally`.
    pub(crate) fn of(&self, tally: &Arc<Tally>) -> bool {
        Arc::ptr_eq(&self.home, tally)
    }
}

impl Drop for TallySlot {
    fn drop(&mut self) {
        let mut slots = self.home.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.free.push(Arc::clone(&self.slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_every_thread_add_up_and_outlive_their_threads() {
        let tally = Arc::new(Tally::default());
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let slot = tally.slot();
                    for _ in 0..10_000 {
                        slot.add(1);
                    }
                });
            }
        });
        assert_eq!(tally.sum(), 40_000);
        // Slots given back are reused with their counts: no more slots than threads at once.
        let slot = tally.slot();
        slot.add(2);
        assert_eq!(tally.sum(), 40_002);
        let slots = tally.slots.lock().expect("not poisoned");
        assert!(slots.all.len() <= 4, "{} slots for at most 4 threads at once", slots.all.len());
    }

    #[test]
    fn a_slot_knows_its_tally() {
        let (a, b) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
        let slot = a.slot();
        assert!(slot.of(&a) && !slot.of(&b));
    }
}
