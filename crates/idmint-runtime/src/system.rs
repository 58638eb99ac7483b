//! IDs now, in one line: ready-made generators on the system clock, like `Uuid::now_v7()`.

use idmint_core::{Generator, GeneratorConfig, Snowflake, SystemClock};

use crate::{BlockingGenerator, Error};

/// A Twitter Snowflake generator on the system clock that waits by sleeping when a
/// millisecond's 4,096 IDs are used up: [`SnowflakeGenerator::system`].
pub type SnowflakeGenerator = BlockingGenerator<Generator<Snowflake>, SystemClock>;

impl SnowflakeGenerator {
    /// A generator for `datacenter` (0..=31) and `worker` (0..=31) on the system clock.
    ///
    /// It is unique within this process. Two processes need different (datacenter, worker)
    /// pairs, and a restart with the clock set back can repeat IDs: for a fleet or restarts,
    /// run `idmint serve`, which claims worker IDs and stores high-water marks.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] for a datacenter or worker out of range.
    ///
    /// # Example
    ///
    /// ```
    /// let ids = idmint_runtime::SnowflakeGenerator::system(1, 7)?;
    /// let (a, b) = (ids.next()?, ids.next()?);
    /// assert!(b > a && a.into_parts().worker == 7);
    /// # Ok::<(), idmint_runtime::Error>(())
    /// ```
    pub fn system(datacenter: u64, worker: u64) -> Result<Self, Error> {
        let source = Snowflake::generator(datacenter, worker, &GeneratorConfig::default())?;
        Ok(BlockingGenerator::new(source, SystemClock))
    }
}
