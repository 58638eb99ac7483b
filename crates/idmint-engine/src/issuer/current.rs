//! [`Current`]: what a lane of source `generator` issues from now (its claim and generator, an
//! [`Active`], or none), and how the one-ID path reads it without a locked instruction.
//!
//! Every change of a lane's state (a claim taken, lost, replaced or released at shutdown)
//! gives it a new stamp, unique in the process and never reused. Each thread keeps a copy of
//! the last lane state it read, with that state's stamp and a slot of the namespace's
//! `single_ids` tally ([`Tally`]); a call compares the lane's stamp (a plain acquire load) to
//! its copy's and uses the copy only if they are equal, else reads the lane again first. So a
//! copy is never used once its state was replaced: the next call after a change sees the new
//! stamp. A call already past the comparison when the state changes finishes on the state it
//! read, as a call holding an `arc-swap` guard did: its generator's ceiling is the mark stored
//! for that claim, and the next holder of the generator ID starts above it.

use std::{
    cell::{RefCell, RefMut},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use arc_swap::{ArcSwapOption, Guard};

use crate::{
    issuer::active::Active,
    tally::{Tally, TallySlot},
};

/// The next stamp; 0 is never one, so no copy matches a lane before it is read.
static STAMPS: AtomicU64 = AtomicU64::new(1);

fn fresh_stamp() -> u64 {
    STAMPS.fetch_add(1, Ordering::Relaxed)
}

/// A thread's copy of one lane's state.
#[derive(Debug)]
struct Copy {
    stamp: u64,
    active: Option<Arc<Active>>,
    singles: TallySlot,
}

thread_local! {
    /// The calling thread's copy of the lane it issued from last (one lane: a thread that
    /// alternates between namespaces reads the lane again on each switch).
    static COPY: RefCell<Option<Copy>> = const { RefCell::new(None) };
}

/// A lane's state now, and its stamp.
#[derive(Debug)]
pub(crate) struct Current {
    active: ArcSwapOption<Active>,
    /// The stamp of `active`: moved on after every change of it, under `writing`.
    stamp: AtomicU64,
    /// Held by a change from its swap to its new stamp, so that the last stamp belongs to the
    /// last state.
    writing: Mutex<()>,
}

impl Default for Current {
    fn default() -> Self {
        Current {
            active: ArcSwapOption::empty(),
            stamp: AtomicU64::new(fresh_stamp()),
            writing: Mutex::new(()),
        }
    }
}

impl Current {
    /// The state now, for the paths that are not the one-ID path.
    pub(crate) fn load(&self) -> Guard<Option<Arc<Active>>> {
        self.active.load()
    }

    /// The state now, held.
    pub(crate) fn load_full(&self) -> Option<Arc<Active>> {
        self.active.load_full()
    }

    /// Replaces the state (a new claim, or none), returning the one before; every thread's
    /// copy of it is stale from here on.
    pub(crate) fn replace(&self, active: Option<Arc<Active>>) -> Option<Arc<Active>> {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let before = self.active.swap(active);
        // After the swap: a thread that reads this stamp reads the new state after it.
        self.stamp.store(fresh_stamp(), Ordering::Release);
        before
    }

    /// The state as the calling thread last read it, if its stamp is still the lane's, or as
    /// read now (the thread's copy renewed), with the thread's slot of `singles` (the tally of
    /// the lane's namespace): a guard on the thread's copy, used in the caller's frame (a
    /// closure run inside `LocalKey::with` was kept out of line, with its captures and a copy
    /// of its answer, whatever the hints). `None` when the thread has no copy to use (it is
    /// ending, or is inside a call already): the caller reads the lane itself.
    #[inline(always)]
    pub(crate) fn copy<'a>(&'a self, singles: &Arc<Tally>) -> Option<ThreadCopy<'a>> {
        // Before the state, so that a copy made now never pairs a newer stamp with an older
        // state.
        let stamp = self.stamp.load(Ordering::Acquire);
        let cell = COPY.try_with(std::ptr::from_ref).ok()?;
        #[expect(unsafe_code, reason = "a guard on a thread-local, without a closure")]
        // SAFETY: `cell` points to this thread's `COPY`, which `try_with` found alive; it stays
        // alive until the thread's thread-local destructors run, which no code of this call can
        // start. The guard it gives is not `Send` (`RefMut`), lives in the caller's frame (the
        // one-ID path drops it before returning), and so never outlives the thread's `COPY`.
        let cell: &'a RefCell<Option<Copy>> = unsafe { &*cell };
        let mut copy = cell.try_borrow_mut().ok()?;
        if !copy.as_ref().is_some_and(|copy| fresh(copy, stamp)) {
            let before = copy.take();
            *copy = Some(self.read(stamp, singles, before));
        }
        RefMut::filter_map(copy, Option::as_mut).ok().map(ThreadCopy)
    }

    /// A copy of the state as read now, under `stamp` (read before it); the slot of the copy
    /// `before` is kept when it counts into the same tally.
    #[cold]
    fn read(&self, stamp: u64, singles: &Arc<Tally>, before: Option<Copy>) -> Copy {
        let active = self.active.load_full();
        let singles = match before {
            Some(before) if before.singles.of(singles) => before.singles,
            _ => singles.slot(),
        };
        Copy { stamp, active, singles }
    }
}

/// The calling thread's copy of a lane's state, borrowed ([`Current::copy`]).
pub(crate) struct ThreadCopy<'a>(RefMut<'a, Copy>);

impl ThreadCopy<'_> {
    /// The lane's claim and generator, or none (it claims again).
    #[inline(always)]
    pub(crate) fn active(&self) -> Option<&Active> {
        self.0.active.as_deref()
    }

    /// The thread's slot of the namespace's `single_ids` tally.
    #[inline(always)]
    pub(crate) fn singles(&self) -> &TallySlot {
        &self.0.singles
    }
}

/// Whether a thread's copy is of the lane state whose stamp is `stamp`.
#[inline]
fn fresh(copy: &Copy, stamp: u64) -> bool {
    #[cfg(test)]
    if tests::STALE_COPIES.get() {
        return true;
    }
    copy.stamp == stamp
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;

    thread_local! {
        /// The negative control of the stamp check, for the calling thread only: a copy is
        /// used whatever the lane's state is now.
        pub(crate) static STALE_COPIES: Cell<bool> = const { Cell::new(false) };
    }
}
