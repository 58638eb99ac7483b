//! [`Probe`]: the order in which a claim over a shared store tries the free generator IDs of a
//! pool, so that claimants that start together stop meeting on the same candidates.
//!
//! Tried lowest first, N claimants that list the held IDs at the same moment all try the same
//! ID, then the next, and so on: the k-th of them wins on its k-th try, N²/2 create attempts in
//! all, each a round trip (DESIGN.md, "Why do claimants that start together spread out?"). So
//! the first try is the lowest free ID, as a lone claimant's always is, and after `c` tries
//! that found their candidate taken, the next is drawn at random from the `2^c` lowest free IDs
//! not tried yet: the claimants spread as a binary exponential backoff spreads senders, and
//! each meets in the order of log₂ N conflicts. The window never grows past 4 (k + 1) free
//! IDs, k being the IDs the claim knows to be taken (listed or tried), so the ID drawn is below
//! the (5k + 4)-th candidate: N claimants that start on an empty store hold IDs below 5N,
//! whatever their draws. After every 8 conflicts the claim lists the held IDs again
//! ([`Probe::relist_due`]): in a nearly full pool the few free IDs are otherwise hidden among
//! many taken since the first listing.

use std::collections::HashSet;

use idmint_core::SplitMix64;

use crate::GeneratorIds;

/// The widest draw: after this many conflicts the window stops doubling.
const MAX_DOUBLINGS: u32 = 20;

/// The candidates of one claim, in the order to try them ([`Iterator`]): each call to `next`
/// after the first means that the one before was found taken.
///
/// # Example
///
/// ```
/// use idmint_coord::{GeneratorIds, Probe};
///
/// let pool = GeneratorIds::Pool { count: 1_024 };
/// let mut probe = Probe::new(pool, [0, 1, 3], 7);
/// // The lowest free ID first.
/// assert_eq!(probe.next(), Some(2));
/// // Found taken: the next is one of the two lowest free IDs left (4 or 5).
/// assert!(matches!(probe.next(), Some(4 | 5)));
/// // Every candidate is tried at most once, and only free ones.
/// let mut all = Probe::new(GeneratorIds::Pool { count: 8 }, [5], 1).collect::<Vec<_>>();
/// all.sort();
/// assert_eq!(all, vec![0, 1, 2, 3, 4, 6, 7]);
/// ```
#[derive(Debug)]
pub struct Probe {
    ids: GeneratorIds,
    /// Held when the claim listed them, or tried since.
    skip: HashSet<u64>,
    /// Candidates tried so far (found taken, once the next is asked for).
    tried: u32,
    draws: SplitMix64,
}

impl Probe {
    /// The candidates of `ids` without those listed as `held`, drawn with `seed`: a seed that
    /// differs between claimants (a lease ID, a process's random key), so that claimants that
    /// meet draw apart.
    pub fn new(ids: GeneratorIds, held: impl IntoIterator<Item = u64>, seed: u64) -> Self {
        Probe { ids, skip: held.into_iter().collect(), tried: 0, draws: SplitMix64::new(seed) }
    }

    /// Whether the claim should list the held IDs again (and give them to
    /// [`add_held`](Self::add_held)) before its next try: after every 8 conflicts, when what
    /// it listed is old. In a pool that is nearly full, the last claimants otherwise draw
    /// among candidates taken since, many times over, for the few that are free.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{GeneratorIds, Probe};
    ///
    /// let mut probe = Probe::new(GeneratorIds::Pool { count: 64 }, [], 1);
    /// let due: Vec<bool> = (0..9).map(|_| (probe.next(), probe.relist_due()).1).collect();
    /// assert_eq!(due, [false, false, false, false, false, false, false, true, false]);
    /// ```
    pub fn relist_due(&self) -> bool {
        self.tried >= 8 && self.tried.is_multiple_of(8)
    }

    /// Candidates found held since the claim began (a new listing): never tried.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{GeneratorIds, Probe};
    ///
    /// let mut probe = Probe::new(GeneratorIds::Pool { count: 3 }, [], 1);
    /// probe.add_held([0, 2]);
    /// assert_eq!(probe.collect::<Vec<_>>(), vec![1]);
    /// ```
    pub fn add_held(&mut self, held: impl IntoIterator<Item = u64>) {
        self.skip.extend(held);
    }
}

impl Iterator for Probe {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        // Doubling with each conflict, and never wider than 4 (k + 1) for the k IDs known to be
        // taken: the bound on how high an ID is drawn does not rest on the draws.
        let widest = self.skip.len().saturating_add(1).saturating_mul(4);
        let window = (1usize << self.tried.min(MAX_DOUBLINGS)).min(widest);
        let skip = &self.skip;
        // Drawn among the free candidates of the window that there are: clamped to the last
        // one instead, the claimants of a nearly full pool would all draw the same.
        let room: Vec<u64> =
            self.ids.candidates().filter(|id| !skip.contains(id)).take(window).collect();
        let nth = match room.len() as u64 {
            0 => return None,
            1 => 0,
            len => self.draws.next_u64() % len,
        };
        let pick = room[usize::try_from(nth).ok()?];
        self.skip.insert(pick);
        self.tried = self.tried.saturating_add(1);
        Some(pick)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// `claimants` that list the held IDs at the same moment, then try one candidate each per
    /// round, every candidate going to the first of the round that tries it, and list again
    /// when their probe says so: the create attempts that found their candidate taken, the
    /// listings after the first, and the IDs held at the end.
    fn race(claimants: u64, count: u64, spread: bool, seeds: u64) -> (u64, u64, BTreeSet<u64>) {
        let ids = GeneratorIds::Pool { count };
        let mut probes: Vec<Probe> =
            (0..claimants).map(|i| Probe::new(ids, [], seeds + i)).collect();
        // The control: the lowest free candidate first, as every claim tried before.
        let mut lowest_first: Vec<_> = (0..claimants).map(|_| ids.candidates()).collect();
        let mut held = BTreeSet::new();
        let mut waiting: Vec<usize> = (0..probes.len()).collect();
        let (mut conflicts, mut listings) = (0, 0);
        while !waiting.is_empty() {
            let listed = held.clone();
            let mut next = Vec::new();
            for i in waiting {
                let probe = &mut probes[i];
                let id = if spread { probe.next() } else { lowest_first[i].next() };
                let Some(id) = id else { continue };
                if held.insert(id) {
                    continue;
                }
                conflicts += 1;
                if spread && probe.relist_due() {
                    probe.add_held(listed.iter().copied());
                    listings += 1;
                }
                next.push(i);
            }
            waiting = next;
        }
        assert_eq!(held.len() as u64, claimants.min(count));
        (conflicts, listings, held)
    }

    /// Claimants that start together meet in the order of log₂ N conflicts each, not N/2, and
    /// hold IDs below 5N; the negative control, every claimant trying the lowest free ID first
    /// as before, costs N(N-1)/2.
    #[test]
    fn claimants_that_start_together_spread_out() {
        for claimants in [2, 50, 500, 1_022] {
            let (conflicts, listings, held) = race(claimants, 1_024, true, 0);
            let (control, ..) = race(claimants, 1_024, false, 0);
            assert_eq!(control, claimants * (claimants - 1) / 2, "the control");
            let log2 = u64::from(claimants.ilog2()) + 1;
            assert!(
                conflicts + listings <= claimants * 2 * log2,
                "{claimants}: {conflicts} + {listings}"
            );
            assert!(held.last().is_some_and(|&top| top < 5 * claimants), "{claimants}: {held:?}");
        }
    }

    /// However the draws fall, 10 claimants that start on an empty store hold IDs below 50:
    /// the window is bounded by what the claim knows to be taken, not by luck.
    #[test]
    fn how_high_an_id_is_drawn_does_not_rest_on_the_draws() {
        for seeds in (0..2_000).step_by(10) {
            let (.., held) = race(10, 1_024, true, seeds);
            assert!(held.iter().all(|&id| id < 50), "seeds from {seeds}: {held:?}");
        }
    }

    /// A lone claimant takes the lowest free ID; every candidate is tried once at most, only
    /// free ones, until none is left.
    #[test]
    fn a_probe_tries_each_free_candidate_once() {
        let stride = GeneratorIds::Stride { first: 5, step: 16, count: 40 };
        let held = [5, 21, 101];
        assert_eq!(Probe::new(stride, held, 3).next(), Some(37));
        for seed in 0..50 {
            let tried: Vec<u64> = Probe::new(stride, held, seed).collect();
            let distinct: BTreeSet<u64> = tried.iter().copied().collect();
            let free: BTreeSet<u64> = stride.candidates().filter(|id| !held.contains(id)).collect();
            assert_eq!((tried.len(), distinct), (free.len(), free), "seed {seed}");
        }
        assert_eq!(Probe::new(GeneratorIds::Fixed(9), [], 0).collect::<Vec<_>>(), vec![9]);
        assert_eq!(Probe::new(GeneratorIds::Fixed(9), [9], 0).next(), None);
    }
}
