//! The simulation's only source of randomness: SplitMix64, seeded per run and per actor, so
//! that a seed replays the same faults and requests; and the paused runtime a run is driven on,
//! whose own random choices the same seed fixes.

/// A small seeded generator (idmint-core's SplitMix64) with the draws a schedule needs. Not
/// for cryptography; for schedules.
///
/// # Example
///
/// ```
/// use idmint_sim::Rng;
///
/// let (mut a, mut b) = (Rng::new(7), Rng::new(7));
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// ```
#[derive(Debug, Clone)]
pub struct Rng(idmint_core::SplitMix64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(idmint_core::SplitMix64::new(seed))
    }

    /// A generator derived from this one for actor `stream`, independent of the order in
    /// which actors draw.
    pub fn fork(&self, stream: u64) -> Rng {
        let mixed = self.0.state() ^ stream.wrapping_mul(0xA076_1D64_78BD_642F);
        Rng::new(idmint_core::SplitMix64::new(mixed).next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high.saturating_sub(low).saturating_add(1))
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Runs `run` to its end on a current-thread runtime in paused time, tokio's random choices
/// seeded from `seed`: `tokio::select!` picks among ready branches at random (the server's
/// window task uses it), and only `--cfg tokio_unstable` lets us seed that choice, which makes
/// replays exact.
pub(crate) fn block_on_seeded<F: std::future::Future>(seed: u64, run: F) -> F::Output {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time().start_paused(true);
    #[cfg(tokio_unstable)]
    builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&seed.to_le_bytes()));
    #[cfg(not(tokio_unstable))]
    let _ = seed;
    builder.build().expect("a current-thread runtime").block_on(run)
}
