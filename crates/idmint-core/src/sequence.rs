//! The lock-free state machine behind every time-based generator: one atomic word that holds
//! the last issued (tick, sequence) pair, advanced by compare-and-swap.
//!
//! The word is `tick << seq_bits | seq`, so the pairs it takes are totally ordered by the
//! atomic's modification order: every successful CAS hands out a pair no other call ever gets,
//! and each new pair is greater than the last. Uniqueness and monotonicity rest on that alone,
//! whatever the clock reads. Time only decides *which* greater pair is next, and whether the
//! caller must wait for it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{error::Error, next::Next, pack::Shape};

/// The clock rules of a generator, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// Unix ms of tick 0.
    pub(crate) epoch_ms: u64,
    /// Length of one tick in ms (at least 1).
    pub(crate) tick_ms: u64,
    /// The last tick the layout can represent (for wrapping layouts: the largest tick that
    /// still fits the state word).
    pub(crate) max_tick: u64,
    /// How many ticks the clock may lag behind the last issued tick before it is an error.
    pub(crate) backward_ticks: u64,
    /// How many ticks ahead of the clock a generator may run when its sequence is exhausted.
    pub(crate) borrow_ticks: u64,
}

/// What comes after the last pair: the next pair, or a time to wait for.
enum Step {
    Go(u64),
    WaitUntil(u64),
}

/// The shared (tick, sequence) counter.
#[derive(Debug)]
pub(crate) struct Sequencer {
    /// The last issued pair, `tick << seq_bits | seq`.
    state: AtomicU64,
    /// The highest tick that may be issued: the durable high-water mark, or `max_tick`.
    ceiling: AtomicU64,
    seq_bits: u32,
    /// `2^seq_bits − 1`: the sequence part of a pair.
    seq_mask: u64,
    /// Sequence values are `0..seq_limit` (`seq_limit <= 2^seq_bits`).
    seq_limit: u64,
    timing: Timing,
}

impl Sequencer {
    /// A sequencer whose first pair is above `(start_tick, *)`, or any pair if `start_tick` is
    /// `None`. The pair (0, 0) is never issued, which keeps an all-zero ID out of every layout.
    pub(crate) fn new(
        seq_bits: u32,
        seq_limit: u64,
        timing: Timing,
        start_after_tick: Option<u64>,
    ) -> Self {
        debug_assert!(seq_limit >= 1 && seq_limit <= 1 << seq_bits);
        let state = match start_after_tick {
            Some(tick) => tick << seq_bits | (seq_limit - 1),
            None => 0,
        };
        Sequencer {
            state: AtomicU64::new(state),
            ceiling: AtomicU64::new(timing.max_tick),
            seq_bits,
            seq_mask: (1u64 << seq_bits) - 1,
            seq_limit,
            timing,
        }
    }

    pub(crate) fn timing(&self) -> &Timing {
        &self.timing
    }

    pub(crate) fn seq_limit(&self) -> u64 {
        self.seq_limit
    }

    /// The tick of a clock reading.
    #[inline]
    pub(crate) fn tick_of(&self, now_ms: u64) -> Result<u64, Error> {
        if now_ms < self.timing.epoch_ms {
            return Err(self.before_epoch(now_ms));
        }
        let since = now_ms - self.timing.epoch_ms;
        Ok(if self.timing.tick_ms == 1 { since } else { since / self.timing.tick_ms })
    }

    #[cold]
    #[inline(never)]
    fn before_epoch(&self, now_ms: u64) -> Error {
        Error::BeforeEpoch { now_ms, epoch_ms: self.timing.epoch_ms }
    }

    /// The Unix ms at which `tick` begins.
    pub(crate) fn time_of(&self, tick: u64) -> u64 {
        tick.saturating_mul(self.timing.tick_ms).saturating_add(self.timing.epoch_ms)
    }

    /// The last issued tick, if anything was issued or a start point was given.
    pub(crate) fn last_tick(&self) -> u64 {
        self.state.load(Ordering::Acquire) >> self.seq_bits
    }

    /// Lowers or raises the highest tick that may be issued (never above the layout's end).
    pub(crate) fn set_ceiling(&self, tick: u64) {
        self.ceiling.store(tick.min(self.timing.max_tick), Ordering::Release);
    }

    pub(crate) fn ceiling(&self) -> u64 {
        self.ceiling.load(Ordering::Acquire)
    }

    /// The next pair in the two common cases, in one try: room left in the clock's tick, or a
    /// new tick, both within the ceiling. `None` for everything else (a clock behind the last
    /// tick or before the epoch, a used-up tick, the ceiling, a lost race), which the caller
    /// hands to [`next`](Self::next): it decides every case, these two included, so a `None`
    /// never changes the answer, only its cost.
    ///
    /// The clock's epoch and tick and the sequence come in as `shape`, not from `self`:
    /// always inlined, a caller that passes constants (a typed generator of a built-in layout)
    /// gets code specialised to them. They must be the values this sequencer was built with.
    #[inline(always)]
    pub(crate) fn try_next(&self, shape: Shape, now_ms: u64) -> Option<u64> {
        debug_assert!(
            shape.epoch_ms == self.timing.epoch_ms
                && shape.tick_ms == self.timing.tick_ms
                && shape.seq_bits == self.seq_bits
                && shape.seq_limit == self.seq_limit
        );
        let since = now_ms.checked_sub(shape.epoch_ms)?;
        let now_tick = if shape.tick_ms == 1 { since } else { since / shape.tick_ms };
        self.try_next_tick(now_tick, shape.seq_bits, shape.seq_limit)
    }

    /// [`try_next`](Self::try_next) from a tick: for a generator whose ticks are not
    /// milliseconds since an epoch (UUIDv7's sub-millisecond ticks since the Unix epoch).
    /// `seq_bits` and `seq_limit` must be this sequencer's.
    #[inline(always)]
    pub(crate) fn try_next_tick(
        &self,
        now_tick: u64,
        seq_bits: u32,
        seq_limit: u64,
    ) -> Option<u64> {
        debug_assert!(seq_bits == self.seq_bits && seq_limit == self.seq_limit);
        if now_tick > self.ceiling.load(Ordering::Relaxed) {
            return None;
        }
        let last = self.state.load(Ordering::Relaxed);
        let last_tick = last >> seq_bits;
        let first = if now_tick == last_tick {
            // `last_tick` is `now_tick`, so it is within the ceiling too.
            if (last & ((1 << seq_bits) - 1)) + 1 >= seq_limit {
                return None;
            }
            last + 1
        } else if now_tick > last_tick {
            now_tick << seq_bits
        } else {
            return None;
        };
        self.state
            .compare_exchange_weak(last, first, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| first)
    }

    /// Reserves the next pair. Returns the packed pair, or when the caller must retry.
    #[inline]
    pub(crate) fn next(&self, now_ms: u64) -> Result<Next<u64>, Error> {
        let now_tick = self.tick_of(now_ms)?;
        let ceiling = self.ceiling.load(Ordering::Relaxed);
        let mut last = self.state.load(Ordering::Relaxed);
        loop {
            let last_tick = last >> self.seq_bits;
            // The two common cases first: room left in the current tick, or a new tick. Both
            // stay within the ceiling and need no waiting; everything else is `successor`'s.
            let first = if now_tick == last_tick
                && (last & self.seq_mask) + 1 < self.seq_limit
                && last_tick <= ceiling
            {
                last + 1
            } else if now_tick > last_tick && now_tick <= ceiling {
                now_tick << self.seq_bits
            } else {
                match self.successor(last, now_tick, ceiling)? {
                    Step::Go(first) => first,
                    Step::WaitUntil(until_ms) => return Ok(Next::Wait { until_ms }),
                }
            };
            match self.state.compare_exchange_weak(last, first, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(Next::Ready(first)),
                Err(actual) => last = actual,
            }
        }
    }

    /// Reserves up to `n` consecutive pairs in one step: as many as the allowed ticks hold.
    /// Returns the first pair and the count (at least 1).
    pub(crate) fn reserve(&self, now_ms: u64, n: u64) -> Result<Next<(u64, u64)>, Error> {
        if n == 0 {
            return Err(Error::EmptyBatch);
        }
        let now_tick = self.tick_of(now_ms)?;
        let ceiling = self.ceiling.load(Ordering::Relaxed);
        let mut last = self.state.load(Ordering::Relaxed);
        loop {
            let first = match self.successor(last, now_tick, ceiling)? {
                Step::Go(first) => first,
                Step::WaitUntil(until_ms) => return Ok(Next::Wait { until_ms }),
            };
            let last_tick = last >> self.seq_bits;
            let limit_tick =
                last_tick.max(now_tick.saturating_add(self.timing.borrow_ticks)).min(ceiling);
            let (first_tick, first_seq) = self.split(first);
            // Pairs from `first` to the end of `limit_tick`, inclusive.
            let available = (limit_tick - first_tick)
                .saturating_mul(self.seq_limit)
                .saturating_add(self.seq_limit - first_seq);
            let count = n.min(available);
            let end = self.advance(first, count - 1);
            match self.state.compare_exchange_weak(last, end, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(Next::Ready((first, count))),
                Err(actual) => last = actual,
            }
        }
    }

    /// The pair after `last`, or a wait, or an error: every case, the rare ones included.
    #[inline(never)]
    fn successor(&self, last: u64, now_tick: u64, ceiling: u64) -> Result<Step, Error> {
        let last_tick = last >> self.seq_bits;
        #[cfg(idmint_negative_controls)]
        let now_tick = if crate::clock::clock_guard_disabled() && now_tick < last_tick {
            // The negative control: forget the last ID and restart at the clock.
            return Ok(Step::Go(now_tick << self.seq_bits));
        } else {
            now_tick
        };
        let next = if now_tick > last_tick {
            // Checked before shifting, so that the shift cannot overflow.
            if now_tick > ceiling {
                return Err(self.above_ceiling(ceiling));
            }
            now_tick << self.seq_bits
        } else {
            let behind = last_tick - now_tick;
            if behind > self.timing.backward_ticks.saturating_add(self.timing.borrow_ticks) {
                return Err(self.backward(behind));
            }
            if (last & self.seq_mask) + 1 < self.seq_limit {
                last + 1
            } else if last_tick >= ceiling {
                // Checked before shifting: at the state word's last tick the shift would wrap
                // to tick 0 and reissue IDs.
                return Err(self.above_ceiling(ceiling));
            } else {
                (last_tick + 1) << self.seq_bits
            }
        };
        let tick = next >> self.seq_bits;
        if tick > ceiling {
            return Err(self.above_ceiling(ceiling));
        }
        if tick > last_tick.max(now_tick.saturating_add(self.timing.borrow_ticks)) {
            let until_ms = self.time_of(tick - self.timing.borrow_ticks);
            return Ok(Step::WaitUntil(until_ms));
        }
        Ok(Step::Go(next))
    }

    #[cold]
    #[inline(never)]
    fn backward(&self, behind_ticks: u64) -> Error {
        Error::ClockBackward {
            behind_ms: behind_ticks.saturating_mul(self.timing.tick_ms),
            tolerance_ms: self.timing.backward_ticks.saturating_mul(self.timing.tick_ms),
        }
    }

    #[cold]
    #[inline(never)]
    fn above_ceiling(&self, ceiling: u64) -> Error {
        if ceiling >= self.timing.max_tick {
            Error::TimeExhausted {
                last_ms: self.time_of(self.timing.max_tick + 1).saturating_sub(1),
            }
        } else {
            Error::WindowExhausted { ceiling_ms: self.time_of(ceiling + 1).saturating_sub(1) }
        }
    }

    /// Splits a packed pair into (tick, seq).
    #[inline]
    pub(crate) fn split(&self, pair: u64) -> (u64, u64) {
        (pair >> self.seq_bits, pair & self.seq_mask)
    }

    /// The pair `k` places after `pair`.
    #[inline]
    pub(crate) fn advance(&self, pair: u64, k: u64) -> u64 {
        let (tick, seq) = self.split(pair);
        let seq = seq + k;
        ((tick + seq / self.seq_limit) << self.seq_bits) | (seq % self.seq_limit)
    }
}
