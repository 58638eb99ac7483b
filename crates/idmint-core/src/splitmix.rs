//! SplitMix64, the one small seeded generator of the workspace: for schedules, retry jitter
//! and test ports, where a seed must replay the same draws. Never for the bits of an ID
//! (`random.rs` keys those from the operating system) and never for cryptography.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// 2014): a 64-bit state advanced by a constant, its output mixed. The same seed gives the
/// same draws on every machine.
///
/// # Example
///
/// ```
/// use idmint_core::SplitMix64;
///
/// let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert_ne!(a.next_u64(), SplitMix64::new(8).next_u64());
/// ```
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A stream from `seed`.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    /// ```
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The state: a stream started from it (`SplitMix64::new(state)`) goes on as this one
    /// does, which is how a seeded schedule derives a stream per actor.
    ///
    /// # Example
    ///
    /// ```
    /// let mut rng = idmint_core::SplitMix64::new(5);
    /// rng.next_u64();
    /// let mut copy = idmint_core::SplitMix64::new(rng.state());
    /// assert_eq!(copy.next_u64(), rng.next_u64());
    /// ```
    pub const fn state(&self) -> u64 {
        self.0
    }

    /// The next 64 bits.
    ///
    /// # Example
    ///
    /// ```
    /// let mut rng = idmint_core::SplitMix64::new(1);
    /// assert_ne!(rng.next_u64(), rng.next_u64());
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
