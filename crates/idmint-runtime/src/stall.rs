//! The stall rule shared by the blocking and the async generator: count the waits after which
//! the clock has not moved, and give up after a limit. [`Due`] runs it with the clock readings
//! of one call; the waiting itself is left to the generator.

use idmint_core::{Clock, Next};

use crate::Error;

/// The default number of waits in a row without any clock progress before
/// [`Error::ClockStalled`]. With waits of about a millisecond that is about 0.1 s, far more
/// than a healthy clock ever takes to tick, and far less than a user waits before calling a
/// program hung. (LableOrg gives up after 11 sleeps of 400 µs.)
pub(crate) const DEFAULT_STALL_LIMIT: u32 = 100;

/// The waits of one call: how many in a row left the clock where it was.
#[derive(Debug)]
pub(crate) struct Stall {
    limit: u32,
    /// Waits since the clock last moved above `highest_ms`.
    waits: u32,
    /// The highest reading seen during the call.
    highest_ms: u64,
    /// The latest reading.
    now_ms: u64,
}

impl Stall {
    /// Starts counting at the call's first clock reading.
    pub(crate) fn new(limit: u32, now_ms: u64) -> Self {
        Stall { limit, waits: 0, highest_ms: now_ms, now_ms }
    }

    /// Called when the source says to wait: `Ok` to wait, or the error if the limit is reached.
    pub(crate) fn before_wait(&self, until_ms: u64) -> Result<(), Error> {
        if self.waits >= self.limit {
            return Err(Error::ClockStalled { until_ms, now_ms: self.now_ms, waits: self.waits });
        }
        Ok(())
    }

    /// Records the reading taken after a wait. Any progress above the highest reading of the
    /// call starts the count again; a reading at or below it (a stopped clock, or one that
    /// stepped back) counts as one more stalled wait.
    pub(crate) fn after_wait(&mut self, now_ms: u64) {
        if now_ms > self.highest_ms {
            self.highest_ms = now_ms;
            self.waits = 0;
        } else {
            self.waits += 1;
        }
        self.now_ms = now_ms;
    }
}

/// One call of a waiting generator: reads the clock, asks the source, and keeps the stall count.
/// The generator loops on [`attempt`](Self::attempt) and waits whenever it answers
/// [`Next::Wait`]; the next attempt reads the clock again.
#[derive(Debug)]
pub(crate) struct Due<'c, C> {
    clock: &'c C,
    /// The latest reading, the one the last attempt was given.
    now_ms: u64,
    stall: Stall,
    /// Whether the last attempt asked to wait, so that the next one reads the clock first.
    waited: bool,
}

impl<'c, C: Clock> Due<'c, C> {
    /// Starts a call at the clock's current reading.
    pub(crate) fn start(clock: &'c C, stall_limit: u32) -> Self {
        let now_ms = clock.now_ms();
        Due { clock, now_ms, stall: Stall::new(stall_limit, now_ms), waited: false }
    }

    /// Calls `attempt` with the current reading (read again after a wait): the value when it
    /// is ready, [`Next::Wait`] when the caller should wait and attempt again, or the error of
    /// the source or of a stalled clock.
    pub(crate) fn attempt<T>(
        &mut self,
        attempt: impl FnOnce(u64) -> Result<Next<T>, idmint_core::Error>,
    ) -> Result<Next<T>, Error> {
        if self.waited {
            self.now_ms = self.clock.now_ms();
            self.stall.after_wait(self.now_ms);
        }
        let next = attempt(self.now_ms)?;
        if let Next::Wait { until_ms } = next {
            self.stall.before_wait(until_ms)?;
            self.waited = true;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `readings` (taken after each wait) and returns the error's `waits`, if any, when
    /// the source keeps asking to wait until `until_ms`.
    fn check(limit: u32, start_ms: u64, readings: &[u64], expected: Option<(u32, u64)>) {
        let until_ms = u64::MAX;
        let mut stall = Stall::new(limit, start_ms);
        let mut outcome = None;
        for &reading in readings {
            if let Err(Error::ClockStalled { waits, now_ms, .. }) = stall.before_wait(until_ms) {
                outcome = Some((waits, now_ms));
                break;
            }
            stall.after_wait(reading);
        }
        if outcome.is_none()
            && let Err(Error::ClockStalled { waits, now_ms, .. }) = stall.before_wait(until_ms)
        {
            outcome = Some((waits, now_ms));
        }
        assert_eq!(outcome, expected, "limit {limit}, readings {readings:?}");
    }

    #[test]
    fn counts_waits_without_progress() {
        check(0, 5, &[], Some((0, 5)));
        check(3, 5, &[5, 5], None);
        check(3, 5, &[5, 5, 5], Some((3, 5)));
        // Progress restarts the count.
        check(3, 5, &[5, 5, 6, 6, 6, 6], Some((3, 6)));
        check(3, 5, &[5, 5, 6, 6, 7], None);
        // A step back, and a return to the old high, are not progress.
        check(3, 9, &[8, 9, 7], Some((3, 7)));
        check(3, 9, &[8, 9, 10], None);
    }
}
