//! The order of pipelined refills: which IDs of the batches that have arrived may be handed out
//! now, so that `next()` keeps handing out increasing IDs when several refills are in flight.
//!
//! A server issues the IDs of one generator in increasing order over time, and two requests it
//! serves at once take turns tick by tick, so their batches can interleave. A request sent
//! after a batch from the same endpoint arrived gets only IDs above that batch. Each request
//! therefore records, per endpoint, the largest ID that had arrived from it when it was sent
//! (its floor): every ID it brings back from that endpoint is above the floor. An arrived ID
//! at or below the floor of every request still in flight can no longer be undercut, and is
//! handed out, merged in order with the other such IDs of its endpoint; the rest waits.
//!
//! With one request in flight at a time (the client's default) every batch is handed out
//! whole as it arrives, without a copy. Batches of layouts without a numeric order, and the
//! IDs of different endpoints, have no order to keep and are handed out as they arrive.
//! Pure state: no I/O, no clock.

use idmint_core::AnyId;

use crate::buffer::Ids;

/// One request's identity, from [`Sequencer::send`].
pub(crate) type Ticket = u64;

/// A batch that came back, and what the sequencer needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// The index of the endpoint that answered.
    pub(crate) endpoint: usize,
    /// The IDs, already checked (strictly increasing when `ordered`).
    pub(crate) ids: Ids,
    /// Whether the namespace's IDs increase per generator, so that there is an order to keep.
    pub(crate) ordered: bool,
}

/// What an arrival released.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Released {
    /// Batches to hand out, in this order (each strictly increasing when ordered).
    pub(crate) batches: Vec<Ids>,
    /// An ID that came back twice, in two batches, and the endpoint that sent it: never
    /// handed out twice (the second copy is dropped), and reported.
    pub(crate) repeated: Option<(usize, AnyId)>,
}

/// The pipelined requests and the IDs that wait for them.
#[derive(Debug)]
pub(crate) struct Sequencer {
    /// Per endpoint.
    held: Vec<Held>,
    /// The requests in flight, with their floors (one per endpoint).
    in_flight: Vec<(Ticket, Vec<Option<AnyId>>)>,
    next_ticket: Ticket,
}

/// What one endpoint has sent that is not handed out yet.
#[derive(Debug, Default)]
struct Held {
    /// The largest ID that arrived from this endpoint.
    top: Option<AnyId>,
    runs: Runs,
}

/// Increasing runs of IDs, each from one batch, not handed out yet.
#[derive(Debug, Default)]
enum Runs {
    #[default]
    Empty,
    U64(Vec<Run<u64>>),
    U128(Vec<Run<u128>>),
}

/// One batch's IDs from `start` on.
#[derive(Debug)]
struct Run<T> {
    ids: Box<[T]>,
    start: usize,
}

impl Sequencer {
    pub(crate) fn new(endpoints: usize) -> Self {
        Sequencer {
            held: (0..endpoints).map(|_| Held::default()).collect(),
            in_flight: Vec::new(),
            next_ticket: 0,
        }
    }

    /// How many requests are in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// How many IDs have arrived and wait to be handed out.
    pub(crate) fn held(&self) -> usize {
        self.held.iter().map(|h| h.runs.len()).sum()
    }

    /// Records a request about to be sent.
    pub(crate) fn send(&mut self) -> Ticket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.in_flight.push((ticket, self.held.iter().map(|h| h.top).collect()));
        ticket
    }

    /// Records the end of a request (`None`: it failed, and brought nothing) and returns what
    /// may be handed out now.
    pub(crate) fn arrive(&mut self, ticket: Ticket, arrival: Option<Arrival>) -> Released {
        self.in_flight.retain(|(t, _)| *t != ticket);
        let mut released = Released::default();
        if let Some(Arrival { endpoint, ids, ordered }) = arrival {
            match self.held.get_mut(endpoint) {
                Some(held) if ordered && !ids.is_empty() => held.push(ids),
                _ => released.batches.push(ids),
            }
        }
        for endpoint in 0..self.held.len() {
            // The lowest floor of the requests in flight; `None` inside: one of them was sent
            // before anything arrived from this endpoint, so nothing of it is final yet.
            let limit = self.in_flight.iter().map(|(_, floors)| floors[endpoint]).min();
            let limit = match limit {
                None => Limit::All,
                Some(None) => continue,
                Some(Some(id)) => Limit::UpTo(id),
            };
            let (ids, repeated) = self.held[endpoint].runs.take(limit);
            released.repeated = released.repeated.or(repeated.map(|id| (endpoint, id)));
            if let Some(ids) = ids {
                released.batches.push(ids);
            }
        }
        released
    }
}

/// Which held IDs to take.
#[derive(Debug, Clone, Copy)]
enum Limit {
    All,
    UpTo(AnyId),
}

impl Held {
    fn push(&mut self, ids: Ids) {
        self.top = self.top.max(ids.last());
        match (&mut self.runs, ids) {
            (Runs::U64(runs), Ids::U64(ids)) => runs.push(Run { ids, start: 0 }),
            (Runs::U128(runs), Ids::U128(ids)) => runs.push(Run { ids, start: 0 }),
            (runs, Ids::U64(ids)) => *runs = Runs::U64(vec![Run { ids, start: 0 }]),
            (runs, Ids::U128(ids)) => *runs = Runs::U128(vec![Run { ids, start: 0 }]),
        }
    }
}

impl Runs {
    fn len(&self) -> usize {
        match self {
            Runs::Empty => 0,
            Runs::U64(runs) => runs.iter().map(|r| r.ids.len() - r.start).sum(),
            Runs::U128(runs) => runs.iter().map(|r| r.ids.len() - r.start).sum(),
        }
    }

    /// Takes the held IDs within `limit`, merged in increasing order.
    fn take(&mut self, limit: Limit) -> (Option<Ids>, Option<AnyId>) {
        match self {
            Runs::Empty => (None, None),
            Runs::U64(runs) => {
                let narrow = |id| if let AnyId::U64(id) = id { Some(id) } else { None };
                let (ids, repeated) = take_within(runs, limit, narrow);
                (ids.map(Ids::U64), repeated.map(AnyId::U64))
            }
            Runs::U128(runs) => {
                let narrow = |id| if let AnyId::U128(id) = id { Some(id) } else { None };
                let (ids, repeated) = take_within(runs, limit, narrow);
                (ids.map(Ids::U128), repeated.map(AnyId::U128))
            }
        }
    }
}

/// [`take_merged`] with the limit in the runs' own width (`narrow`); a limit of another width
/// takes nothing (no ID of this endpoint can be ordered against it).
fn take_within<T: Copy + Ord>(
    runs: &mut Vec<Run<T>>,
    limit: Limit,
    narrow: impl Fn(AnyId) -> Option<T>,
) -> (Option<Box<[T]>>, Option<T>) {
    match limit {
        Limit::All => take_merged(runs, None),
        Limit::UpTo(id) => match narrow(id) {
            Some(id) => take_merged(runs, Some(id)),
            None => (None, None),
        },
    }
}

/// Takes every ID at or below `limit` (all with `None`) from the runs, merged in increasing
/// order, and drops the runs used up. A run taken whole, with nothing to merge it with, is
/// moved, not copied. An ID found in two runs is taken once and returned as repeated.
fn take_merged<T: Copy + Ord>(
    runs: &mut Vec<Run<T>>,
    limit: Option<T>,
) -> (Option<Box<[T]>>, Option<T>) {
    let ends: Vec<usize> = runs
        .iter()
        .map(|run| match limit {
            None => run.ids.len(),
            Some(limit) => run.start + run.ids[run.start..].partition_point(|&id| id <= limit),
        })
        .collect();
    let taking: Vec<usize> = (0..runs.len()).filter(|&i| ends[i] > runs[i].start).collect();
    let (ids, repeated) = match taking[..] {
        [] => return (None, None),
        [only] if runs[only].start == 0 && ends[only] == runs[only].ids.len() => {
            let run = runs.remove(only);
            return (Some(run.ids), None);
        }
        _ => {
            let total: usize = taking.iter().map(|&i| ends[i] - runs[i].start).sum();
            let mut merged = Vec::with_capacity(total);
            let mut repeated = None;
            // Runs interleave in stretches (a tick's IDs at a time): copy the lowest run up to
            // the next run's head in one go.
            loop {
                let mut lowest: Option<(usize, T)> = None;
                let mut next_head: Option<T> = None;
                for &i in &taking {
                    let Some(&head) = runs[i].ids[runs[i].start..ends[i]].first() else { continue };
                    match lowest {
                        Some((_, low)) if head >= low => {
                            next_head = Some(next_head.map_or(head, |n| n.min(head)));
                        }
                        _ => {
                            if let Some((_, low)) = lowest {
                                next_head = Some(next_head.map_or(low, |n| n.min(low)));
                            }
                            lowest = Some((i, head));
                        }
                    }
                }
                let Some((i, head)) = lowest else { break };
                let stretch = &runs[i].ids[runs[i].start..ends[i]];
                let n = next_head.map_or(stretch.len(), |n| stretch.partition_point(|&id| id < n));
                if n == 0 {
                    // Its head is another run's head too: that one is taken, this one dropped.
                    repeated = Some(head);
                    runs[i].start += 1;
                    continue;
                }
                merged.extend_from_slice(&stretch[..n]);
                runs[i].start += n;
            }
            (merged.into_boxed_slice(), repeated)
        }
    };
    runs.retain(|run| run.start < run.ids.len());
    (Some(ids), repeated)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn arrival(endpoint: usize, ids: &[u64]) -> Option<Arrival> {
        Some(Arrival { endpoint, ids: Ids::U64(ids.into()), ordered: true })
    }

    fn flat(released: &Released) -> Vec<u64> {
        released
            .batches
            .iter()
            .flat_map(|b| match b {
                Ids::U64(v) => v.to_vec(),
                Ids::U128(_) => panic!("128-bit"),
            })
            .collect()
    }

    /// One step: `Send` records a request; `Arrive(ticket, ids)` ends one and the IDs it
    /// released must be `want`.
    enum Step<'a> {
        Send,
        Arrive(Ticket, Option<&'a [u64]>, &'a [u64]),
    }

    fn check(endpoints: usize, steps: &[Step<'_>]) {
        let mut sequencer = Sequencer::new(endpoints);
        for (n, step) in steps.iter().enumerate() {
            match *step {
                Step::Send => {
                    sequencer.send();
                }
                Step::Arrive(ticket, ids, want) => {
                    let released = sequencer.arrive(ticket, ids.and_then(|ids| arrival(0, ids)));
                    assert_eq!(flat(&released), want, "step {n}");
                    assert_eq!(released.repeated, None, "step {n}");
                }
            }
        }
    }

    #[test]
    fn one_request_at_a_time_hands_each_batch_out_whole() {
        use Step::*;
        check(1, &[Send, Arrive(0, Some(&[1, 2, 3]), &[1, 2, 3])]);
        check(1, &[Send, Arrive(0, Some(&[1, 2]), &[1, 2]), Send, Arrive(1, Some(&[5]), &[5])]);
        // A failed request releases what waited for it and brings nothing.
        check(1, &[Send, Send, Arrive(0, Some(&[1, 3]), &[]), Arrive(1, None, &[1, 3])]);
    }

    #[test]
    fn interleaved_batches_are_merged_in_order() {
        use Step::*;
        check(
            1,
            &[
                // Two in flight, sent before anything arrived: the first waits for the second.
                Send,
                Send,
                Arrive(0, Some(&[1, 3, 5, 7]), &[]),
                // Ticket 2 was sent after 7 arrived, so it brings only IDs above 7: up to 7
                // is final. It may bring 9, so 8 and 10 wait.
                Send,
                Arrive(1, Some(&[2, 4, 8, 10]), &[1, 2, 3, 4, 5, 7]),
                Send,
                Arrive(2, Some(&[9, 11]), &[8, 9, 10]),
                Arrive(3, Some(&[12]), &[11, 12]),
            ],
        );
    }

    #[test]
    fn a_batch_taken_whole_is_moved_not_copied() {
        let mut sequencer = Sequencer::new(1);
        let t = sequencer.send();
        let ids: Box<[u64]> = vec![4, 5, 6].into();
        let address = ids.as_ptr();
        let released =
            sequencer.arrive(t, Some(Arrival { endpoint: 0, ids: Ids::U64(ids), ordered: true }));
        match &released.batches[..] {
            [Ids::U64(v)] => assert_eq!(v.as_ptr(), address),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unordered_batches_and_other_endpoints_do_not_wait() {
        let mut sequencer = Sequencer::new(2);
        let a = sequencer.send();
        let b = sequencer.send();
        let unordered = Arrival { endpoint: 0, ids: Ids::U64([9, 3].into()), ordered: false };
        assert_eq!(flat(&sequencer.arrive(a, Some(unordered))), [9, 3]);
        // Endpoint 1's batch waits only for requests that might come back from endpoint 1.
        let c = sequencer.send();
        assert_eq!(flat(&sequencer.arrive(b, arrival(1, &[20, 21]))), Vec::<u64>::new());
        assert_eq!(flat(&sequencer.arrive(c, arrival(0, &[1]))), [1, 20, 21]);
    }

    #[test]
    fn a_repeated_id_is_handed_out_once_and_reported() {
        let mut sequencer = Sequencer::new(1);
        let a = sequencer.send();
        let b = sequencer.send();
        assert_eq!(flat(&sequencer.arrive(a, arrival(0, &[1, 2, 3]))), Vec::<u64>::new());
        assert_eq!(sequencer.held(), 3);
        let released = sequencer.arrive(b, arrival(0, &[2, 4]));
        assert_eq!(flat(&released), [1, 2, 3, 4]);
        assert_eq!(released.repeated, Some((0, AnyId::U64(2))));
        assert_eq!(sequencer.held(), 0);
    }

    #[test]
    fn wide_ids_are_merged_too() {
        let mut sequencer = Sequencer::new(1);
        let a = sequencer.send();
        let b = sequencer.send();
        let wide =
            |ids: &[u128]| Some(Arrival { endpoint: 0, ids: Ids::U128(ids.into()), ordered: true });
        assert!(sequencer.arrive(a, wide(&[1, 4])).batches.is_empty());
        let released = sequencer.arrive(b, wide(&[2, 3]));
        assert_eq!(released.batches, [Ids::U128([1, 2, 3, 4].into())]);
    }

    proptest! {
        /// A model of a server: one generator whose IDs grow with time, serving the requests
        /// in flight tick by tick in any interleaving. Whatever the order of sends, ticks and
        /// arrivals, the IDs released are every ID issued, once, in increasing order.
        #[test]
        fn pipelined_refills_hand_out_every_id_once_in_order(
            plan in proptest::collection::vec((0u8..4, 1u8..4, any::<prop::sample::Index>()), 1..200),
            depth in 1usize..4,
        ) {
            let mut sequencer = Sequencer::new(1);
            // Requests in flight at the server: ticket and the IDs issued to it so far.
            let mut serving: Vec<(Ticket, Vec<u64>, usize)> = Vec::new();
            let mut next_id = 0u64;
            let mut out: Vec<u64> = Vec::new();
            let mut issued = BTreeSet::new();
            for (action, size, pick) in plan {
                match action {
                    0 if serving.len() < depth => {
                        let t = sequencer.send();
                        serving.push((t, Vec::new(), usize::from(size) * 2));
                    }
                    1 | 2 if !serving.is_empty() => {
                        // One tick goes to one request in flight.
                        let i = pick.index(serving.len());
                        let (_, ids, want) = &mut serving[i];
                        for _ in 0..size.min(u8::try_from(*want - ids.len()).unwrap_or(u8::MAX)) {
                            next_id += 1;
                            ids.push(next_id);
                            issued.insert(next_id);
                        }
                    }
                    _ if !serving.is_empty() => {
                        let i = pick.index(serving.len());
                        let (t, ids, _) = serving.remove(i);
                        let answer = (!ids.is_empty()).then(|| Arrival {
                            endpoint: 0, ids: Ids::U64(ids.into()), ordered: true,
                        });
                        let released = sequencer.arrive(t, answer);
                        prop_assert_eq!(released.repeated, None);
                        out.extend(flat(&released));
                    }
                    _ => {}
                }
            }
            for (t, ids, _) in std::mem::take(&mut serving) {
                let answer = (!ids.is_empty()).then(|| Arrival {
                    endpoint: 0, ids: Ids::U64(ids.into()), ordered: true,
                });
                out.extend(flat(&sequencer.arrive(t, answer)));
            }
            prop_assert!(out.windows(2).all(|w| w[0] < w[1]), "not increasing: {:?}", out);
            prop_assert_eq!(out.into_iter().collect::<BTreeSet<_>>(), issued);
            prop_assert_eq!(sequencer.in_flight(), 0);
        }
    }
}
