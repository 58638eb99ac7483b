//! The seeded random source of schedules: every choice a nemesis makes (which server, which
//! step, how long) comes from one SplitMix64 stream, so a run replays from its seed.

/// Schedules' random source: idmint-core's SplitMix64, small and replayable.
#[derive(Debug, Clone)]
pub(crate) struct Rng(idmint_core::SplitMix64);

impl Rng {
    /// A stream from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(idmint_core::SplitMix64::new(seed))
    }

    /// The next 64 bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `low..=high`.
    pub(crate) fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }

    /// An index below `n` (n > 0).
    pub(crate) fn index(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// The items of `items` in a seeded order.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.index(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn a_seed_replays_and_another_differs() {
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..8).map(|_| rng.between(10, 30)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(9).iter().all(|v| (10..=30).contains(v)));
    }
}
