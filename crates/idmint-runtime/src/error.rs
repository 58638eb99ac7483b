//! The one error type of `idmint-runtime`: a generator's own error, or a clock that does not
//! move while a generator waits for it.

/// Everything that can go wrong while waiting for an ID.
///
/// Messages are lower-case phrases without a trailing period. The enum is
/// `#[non_exhaustive]`: new kinds of failure are not breaking changes.
///
/// # Example
///
/// ```
/// use idmint_runtime::Error;
///
/// let err = Error::ClockStalled { until_ms: 11, now_ms: 10, waits: 100 };
/// assert_eq!(
///     err.to_string(),
///     "the clock did not reach 11 ms after 100 waits (it reads 10 ms)",
/// );
/// let core = Error::from(idmint_core::Error::EmptyBatch);
/// assert_eq!(core.to_string(), "batch size must be at least 1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The generator refused: the clock is too far back, the time field or the reserved
    /// window ran out, and so on. The message is the generator's own.
    #[error(transparent)]
    Core(#[from] idmint_core::Error),
    /// The generator asked to wait until `until_ms`, and the clock did not move at all across
    /// `waits` consecutive waits (the stall limit).
    ///
    /// This is LableOrg's "Clock supplied to generator failed to progress." as an error
    /// value: a stopped clock ends in this error instead of a hang.
    #[error("the clock did not reach {until_ms} ms after {waits} waits (it reads {now_ms} ms)")]
    ClockStalled {
        /// The Unix ms the generator is waiting for.
        until_ms: u64,
        /// The last clock reading, in Unix ms.
        now_ms: u64,
        /// How many waits in a row left the clock where it was.
        waits: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(err: Error, message: &str) {
        assert_eq!(err.to_string(), message);
    }

    #[test]
    fn messages_are_lower_case_facts() {
        check(
            Error::ClockStalled { until_ms: 1_001, now_ms: 1_000, waits: 11 },
            "the clock did not reach 1001 ms after 11 waits (it reads 1000 ms)",
        );
        check(
            idmint_core::Error::BeforeEpoch { now_ms: 1, epoch_ms: 2 }.into(),
            "clock reads 1 ms, before the layout's epoch 2 ms",
        );
    }
}
