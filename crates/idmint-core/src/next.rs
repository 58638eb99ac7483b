//! [`Next`]: what a generator answers when asked for an ID, a value or a time to wait until.

/// The outcome of asking a generator for an ID: ready, or not before a given time.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Next, Snowflake};
///
/// let generator = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
/// let now_ms = Snowflake::EPOCH_MS + 5;
/// match generator.next(now_ms)? {
///     Next::Ready(id) => assert_eq!(id.into_parts().timestamp, 5),
///     Next::Wait { until_ms } => panic!("unexpected wait until {until_ms}"),
/// }
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Next<T> {
    /// The value is ready.
    Ready(T),
    /// Nothing can be issued before the clock reads `until_ms` (Unix milliseconds): the
    /// sequence of the current tick is used up. Call again at or after that time.
    Wait {
        /// The earliest Unix millisecond at which a call can succeed.
        until_ms: u64,
    },
}

impl<T> Next<T> {
    /// The value, if it is ready.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Next;
    ///
    /// assert_eq!(Next::Ready(7).ready(), Some(7));
    /// assert_eq!(Next::<u64>::Wait { until_ms: 1 }.ready(), None);
    /// ```
    pub fn ready(self) -> Option<T> {
        match self {
            Next::Ready(value) => Some(value),
            Next::Wait { .. } => None,
        }
    }

    /// Applies `f` to a ready value.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Next;
    ///
    /// assert_eq!(Next::Ready(2).map(|v| v * 10), Next::Ready(20));
    /// ```
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Next<U> {
        match self {
            Next::Ready(value) => Next::Ready(f(value)),
            Next::Wait { until_ms } => Next::Wait { until_ms },
        }
    }
}
