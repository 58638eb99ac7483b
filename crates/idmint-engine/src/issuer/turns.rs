//! First come, first served among the calls of a namespace that wait: for the next tick when
//! its sequence is used up, or for the window to be extended.
//!
//! Without it, every waiting call wakes at the tick and races for the generator's
//! compare-and-swap, and a call that has just arrived may take the IDs before any of them: at
//! a namespace's ceiling some clients are served at once and a few starve. So while any call
//! waits, a call that arrives waits behind it instead of taking IDs first. A call without a
//! wait never touches the queue beyond one load ([`Turns::queued`]).
//!
//! A call for more than one ID that has to wait takes a [`Turn`] (tokio's `Mutex` grants its
//! lock in the order it was asked for) and keeps it until its batch is complete.
//!
//! Calls for one ID wait in groups ([`Turns::join`]), so that a turn is handed over once per
//! group, not once per ID: at a ceiling reached by single IDs (eight threads of the embedded
//! minter), a hand-over per ID became the rate, 7 % of the ceiling when it was measured. The
//! first call of a group leads it ([`Leading`]): it takes a turn as a batch does and waits for
//! the tick; then it closes the group, takes one batch for every call that joined, and hands
//! the IDs out in the order the calls came. Calls that come after it closed form the next
//! group. A group counts as waiting only until its IDs are taken, so that once the waiters
//! have theirs, new calls take IDs at once again instead of forming group after group.
//!
//! A leader that is gone before it has served its group (its deadline, an error, a dropped
//! future) hands the lead to the first call still waiting, so that no call waits on one that
//! is gone. A call that stopped waiting leaves its ID unused: a gap, never a duplicate.

use std::{
    collections::VecDeque,
    sync::{
        PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use idmint_core::AnyId;
use tokio::{
    sync::{Mutex, MutexGuard, oneshot},
    time::Instant,
};

/// The queue of a namespace's waiting calls.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    queue: Mutex<()>,
    /// Calls that wait for IDs: batches that hold a turn or wait for one, and single-ID calls
    /// whose IDs are not taken yet.
    waiting: AtomicUsize,
    /// The group of single-ID calls still open: the calls behind its leader, in the order they
    /// came.
    open: std::sync::Mutex<Option<VecDeque<Member>>>,
}

/// A call's turn: while it is held, the calls behind it wait.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    _held: MutexGuard<'a, ()>,
    _counted: Option<Counted<'a>>,
}

/// One call counted in [`Turns::waiting`], until dropped.
#[derive(Debug)]
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where a single-ID call in a group is handed what its leader gives it.
type Member = oneshot::Sender<Handoff>;

/// What a waiting single-ID call is handed by the call ahead of it.
#[derive(Debug)]
pub(crate) enum Handoff {
    /// Its ID.
    Id(AnyId),
    /// The leader is gone before serving it: this call leads now, for itself and the calls
    /// behind it (`None`: the group that is still open).
    Lead(Option<VecDeque<Member>>),
}

/// A single-ID call that has to wait ([`Turns::join`]).
#[derive(Debug)]
pub(crate) enum Single<'a> {
    /// Behind the leader of a group.
    Member(Waiting<'a>),
    /// The first of a new group.
    Leads(Leading<'a>),
}

/// A call behind the leader of its group, until it is handed its ID or the lead. Dropped with
/// the lead handed to it and not yet taken, it hands the lead on.
#[derive(Debug)]
pub(crate) struct Waiting<'a> {
    turns: &'a Turns,
    handed: oneshot::Receiver<Handoff>,
}

/// The call that takes IDs for a group of single-ID calls and hands them out. Dropped before
/// it has served them all, it hands the lead to the first call still waiting.
#[derive(Debug)]
pub(crate) struct Leading<'a> {
    turns: &'a Turns,
    /// The calls it serves, in order; `None` while its group is still open.
    behind: Option<VecDeque<Member>>,
    /// Whether the leader still counts as waiting: until its group's IDs are taken. The calls
    /// behind it count until they are served, or pruned as gone.
    counted: bool,
}

impl Turns {
    /// Whether calls are waiting: a new call then waits behind them.
    #[inline]
    pub(crate) fn queued(&self) -> bool {
        #[cfg(test)]
        if tests::UNQUEUED.get() {
            return false;
        }
        self.waiting.load(Ordering::Acquire) > 0
    }

    fn count(&self) -> Counted<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        Counted(&self.waiting)
    }

    fn uncount(&self, calls: usize) {
        if calls > 0 {
            self.waiting.fetch_sub(calls, Ordering::AcqRel);
        }
    }

    /// Waits for this call's turn, in the order the calls asked; `None` when `deadline`
    /// passes first.
    pub(crate) async fn take(&self, deadline: Instant) -> Option<Turn<'_>> {
        let counted = self.count();
        self.turn(deadline, Some(counted)).await
    }

    /// The turn, with the count that waits for it (none for a group's leader: the group
    /// counts).
    async fn turn<'a>(
        &'a self,
        deadline: Instant,
        counted: Option<Counted<'a>>,
    ) -> Option<Turn<'a>> {
        let held = tokio::time::timeout_at(deadline, self.queue.lock()).await.ok()?;
        Some(Turn { _held: held, _counted: counted })
    }

    /// A single-ID call that has to wait joins the open group, or opens one and leads it.
    pub(crate) fn join(&self) -> Single<'_> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(group) = open.as_mut() {
            let (member, handed) = oneshot::channel();
            group.push_back(member);
            Single::Member(Waiting { turns: self, handed })
        } else {
            *open = Some(VecDeque::new());
            Single::Leads(Leading { turns: self, behind: None, counted: true })
        }
    }
}

impl<'a> Waiting<'a> {
    /// What the leader hands this call: its ID, or the lead. `None` when `deadline` passes
    /// first.
    pub(crate) async fn handed(&mut self, deadline: Instant) -> Option<Result<AnyId, Leading<'a>>> {
        match tokio::time::timeout_at(deadline, &mut self.handed).await {
            Ok(Ok(Handoff::Id(id))) => Some(Ok(id)),
            Ok(Ok(Handoff::Lead(behind))) => {
                Some(Err(Leading { turns: self.turns, behind, counted: true }))
            }
            // A leader always hands over before it goes; were it not to, the call is told to
            // come back rather than left waiting.
            Ok(Err(_)) | Err(_) => None,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Ok(Handoff::Lead(behind)) = self.handed.try_recv() {
            drop(Leading { turns: self.turns, behind, counted: true });
        }
    }
}

impl<'a> Leading<'a> {
    /// The leader's turn: behind the calls that asked first. Not counted on its own: the group
    /// counts.
    pub(crate) async fn take(&self, deadline: Instant) -> Option<Turn<'a>> {
        self.turns.turn(deadline, None).await
    }

    /// Closes the group (calls that come later form the next one) and says how many calls it
    /// serves beside its leader, leaving out those that stopped waiting.
    pub(crate) fn close(&mut self) -> usize {
        let turns = self.turns;
        let behind = self.behind.get_or_insert_with(|| {
            let mut open = turns.open.lock().unwrap_or_else(PoisonError::into_inner);
            open.take().unwrap_or_default()
        });
        let before = behind.len();
        behind.retain(|member| !member.is_closed());
        turns.uncount(before - behind.len());
        behind.len()
    }

    /// Hands each call behind the leader its ID from `ids` (taken for the group), in the order
    /// they came. Before any of them wakes, neither the leader nor the calls served count as
    /// waiting any more, so that calls that come take IDs at once again.
    pub(crate) fn serve(mut self, ids: Vec<AnyId>) {
        let mut behind = self.behind.take().unwrap_or_default();
        let served = ids.len().min(behind.len());
        self.turns.uncount(usize::from(std::mem::take(&mut self.counted)) + served);
        for (id, member) in ids.into_iter().zip(behind.drain(..served)) {
            let _ = member.send(Handoff::Id(id));
        }
        // Fewer IDs than calls cannot happen (the leader took one each); were it to, the rest
        // still count, and are led on when this is dropped.
        self.behind = Some(behind);
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if std::mem::take(&mut self.counted) {
            // This call no longer waits; the calls behind it still do.
            self.turns.uncount(1);
        }
        let turns = self.turns;
        match self.behind.take() {
            Some(mut behind) => {
                while let Some(first) = behind.pop_front() {
                    match first.send(Handoff::Lead(Some(behind))) {
                        Ok(()) => return,
                        Err(Handoff::Lead(Some(rest))) => {
                            turns.uncount(1);
                            behind = rest;
                        }
                        Err(_) => return,
                    }
                }
            }
            None => {
                let mut open = turns.open.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    let Some(first) = open.as_mut().and_then(VecDeque::pop_front) else {
                        // Nobody left in the group: the next call opens a new one.
                        *open = None;
                        return;
                    };
                    if first.send(Handoff::Lead(None)).is_ok() {
                        return;
                    }
                    turns.uncount(1);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::{cell::Cell, sync::Arc, time::Duration};

    use idmint_core::AnyId;
    use tokio::time::Instant;

    use super::{Single, Turns, Waiting};

    thread_local! {
        /// The negative control of the queue, for the calling thread only: a call that comes
        /// while others wait never sees them.
        pub(crate) static UNQUEUED: Cell<bool> = const { Cell::new(false) };
    }

    fn member(single: Single<'_>) -> Waiting<'_> {
        match single {
            Single::Member(waiting) => waiting,
            Single::Leads(_) => panic!("a group is open: the call should join it"),
        }
    }

    /// A group's leader that is gone before serving hands the lead to the first call still
    /// waiting (also when that call is gone before it took the lead), calls that stopped
    /// waiting are left out, the rest get their IDs in the order they came, and the group
    /// stops counting as waiting once its IDs are taken.
    #[tokio::test(start_paused = true)]
    async fn a_group_is_served_in_order_and_led_on_when_its_leader_is_gone() {
        let turns = Turns::default();
        let far = Instant::now() + Duration::from_secs(60);
        let Single::Leads(leader) = turns.join() else { panic!("no group is open: it leads") };
        let mut members: Vec<Waiting<'_>> = (0..5).map(|_| member(turns.join())).collect();
        assert!(turns.queued());
        drop(leader);
        // The first member is handed the lead but is gone before it takes it: it hands it on.
        drop(members.remove(0));
        let mut next = members.remove(0);
        let Some(Err(mut leading)) = next.handed(far).await else { panic!("not handed the lead") };
        // One call stops waiting; the others stay behind the new leader.
        drop(members.remove(0));
        assert_eq!(leading.close(), 2, "the call that stopped waiting is left out");
        // A call that comes now opens the next group, and leads it.
        let Single::Leads(later) = turns.join() else { panic!("the group is closed") };
        drop(later);
        assert!(turns.queued(), "the closed group still waits");
        leading.serve(vec![AnyId::U64(7), AnyId::U64(8)]);
        // Served: new calls take IDs at once again, before the calls served have woken.
        assert!(!turns.queued(), "a group whose IDs are taken still counts as waiting");
        let mut handed = Vec::new();
        for mut waiting in members {
            match waiting.handed(far).await {
                Some(Ok(id)) => handed.push(id),
                other => panic!("no id: {other:?}"),
            }
        }
        assert_eq!(handed, [AnyId::U64(7), AnyId::U64(8)]);
        assert!(!turns.queued(), "a call is still counted as waiting");
    }

    /// Turns are granted in the order they were asked for, and a call that arrives while
    /// others wait sees them queued; a turn not granted by its deadline is `None`, and leaves
    /// no count behind.
    #[tokio::test(start_paused = true)]
    async fn turns_are_first_come_first_served() {
        let turns = Arc::new(Turns::default());
        let far = Instant::now() + Duration::from_secs(60);
        let first = turns.take(far).await.expect("a free queue");
        assert!(turns.queued());
        let (order, mut tasks) = (Arc::new(std::sync::Mutex::new(Vec::new())), Vec::new());
        for call in 0..8 {
            let (turns, order) = (Arc::clone(&turns), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _turn = turns.take(far).await.expect("before the deadline");
                order.lock().expect("order").push(call);
            }));
            // Each asks before the next one does.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(first);
        for task in tasks {
            task.await.expect("task");
        }
        assert_eq!(*order.lock().expect("order"), (0..8).collect::<Vec<_>>());
        assert!(!turns.queued());

        let held = turns.take(far).await.expect("free again");
        let soon = Instant::now() + Duration::from_millis(5);
        assert!(turns.take(soon).await.is_none(), "the deadline passes first");
        drop(held);
        assert!(!turns.queued(), "a turn never granted is not counted");
    }
}
