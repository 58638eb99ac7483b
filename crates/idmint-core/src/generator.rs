//! The sans-I/O generator: give it the time, get an ID, a time to wait until, or an error.
//!
//! A [`Generator`] never reads a clock and never sleeps. It is lock-free (one atomic word, see
//! the private `sequence` module) and `Sync`, so threads share one generator by reference.
//! Callers at the edge (the `idmint-runtime` crate, the server) read the clock, call
//! [`Generator::next`], and do the waiting when told to.

use std::{fmt, marker::PhantomData};

pub use crate::next::Next;
use crate::{
    error::Error,
    pack::{Packer, Plan, Shape, low_mask},
    sequence::{Sequencer, Timing},
};

/// How a generator treats the clock: plain data, checked when a generator is built.
///
/// | field | default | meaning |
/// | --- | --- | --- |
/// | `max_backward_ms` | 1000 | a clock up to this far behind the last issued ID is absorbed by continuing from the last tick; further behind is [`Error::ClockBackward`] |
/// | `borrow_ms` | 0 | how far ahead of the clock the generator may run when a tick's sequence is used up; 0 means wait for the next tick (Hazelcast allows 15 s) |
/// | `start_above_ms` | none | a high-water mark in Unix ms: every ID lies in a tick that starts after it |
///
/// # Example
///
/// ```
/// use idmint_core::GeneratorConfig;
///
/// let config = GeneratorConfig { borrow_ms: 15_000, ..GeneratorConfig::default() };
/// assert_eq!(config.max_backward_ms, 1000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct GeneratorConfig {
    /// The largest backward clock step absorbed, in ms (at most 1 day).
    pub max_backward_ms: u64,
    /// How far ahead of the clock a burst may borrow ticks, in ms (at most 1 hour).
    pub borrow_ms: u64,
    /// Start strictly above this high-water mark (Unix ms), if given.
    pub start_above_ms: Option<u64>,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        GeneratorConfig { max_backward_ms: 1000, borrow_ms: 0, start_above_ms: None }
    }
}

/// The largest accepted `max_backward_ms`: one day.
pub const MAX_BACKWARD_LIMIT_MS: u64 = 86_400_000;
/// The largest accepted `borrow_ms`: one hour.
pub const BORROW_LIMIT_MS: u64 = 3_600_000;

impl GeneratorConfig {
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.max_backward_ms > MAX_BACKWARD_LIMIT_MS {
            return Err(Error::InvalidConfig(format!(
                "max_backward_ms {} is above the limit of {MAX_BACKWARD_LIMIT_MS}",
                self.max_backward_ms
            )));
        }
        if self.borrow_ms > BORROW_LIMIT_MS {
            return Err(Error::InvalidConfig(format!(
                "borrow_ms {} is above the limit of {BORROW_LIMIT_MS}",
                self.borrow_ms
            )));
        }
        Ok(())
    }
}

mod sealed {
    /// Seals [`GeneratedId`](super::GeneratedId), and says what the compiler may know of a
    /// type's generator.
    pub trait Sealed {
        /// The shape of every generator of this type, when it is the same for all (a built-in
        /// bit layout's), so that its hot path is compiled on constants. `None` where it
        /// depends on the generator (the raw `u64`, `Lable`'s modes).
        #[doc(hidden)]
        const SHAPE: Option<crate::pack::Shape> = None;
    }
}

/// An ID type a [`Generator`] can produce. Implemented by the 64-bit layouts of this crate and
/// by `u64` (the raw value); it cannot be implemented outside it.
pub trait GeneratedId: sealed::Sealed + Copy {
    #[doc(hidden)]
    fn from_generated(raw: u64) -> Self;
}

impl sealed::Sealed for u64 {}
impl GeneratedId for u64 {
    #[inline]
    fn from_generated(raw: u64) -> Self {
        raw
    }
}

pub(crate) use sealed::Sealed;

/// Validates `config` and builds the (tick, sequence) counter of a generator whose time field
/// counts `tick_ms` ticks from `epoch_ms` up to `max_tick`. Every generator is built here, so
/// every generator applies a configuration the same way.
pub(crate) fn sequencer(
    config: &GeneratorConfig,
    epoch_ms: u64,
    tick_ms: u64,
    max_tick: u64,
    seq_bits: u32,
    seq_limit: u64,
) -> Result<Sequencer, Error> {
    config.check()?;
    let timing = Timing {
        epoch_ms,
        tick_ms,
        max_tick,
        backward_ticks: config.max_backward_ms / tick_ms,
        borrow_ticks: config.borrow_ms / tick_ms,
    };
    let start_after = match config.start_above_ms {
        Some(mark) if mark >= epoch_ms => {
            let tick = (mark - epoch_ms) / tick_ms;
            if tick >= max_tick {
                return Err(Error::TimeExhausted {
                    last_ms: (max_tick + 1)
                        .saturating_mul(tick_ms)
                        .saturating_add(epoch_ms)
                        .saturating_sub(1),
                });
            }
            Some(tick)
        }
        _ => None,
    };
    Ok(Sequencer::new(seq_bits, seq_limit, timing, start_after))
}

/// A lock-free, sans-I/O generator of 64-bit IDs of layout `I`.
///
/// It keeps the last issued (tick, sequence) pair in one atomic word, and every call moves it
/// strictly up, so a generator never issues the same ID twice and never issues an ID below one
/// it issued before, whatever `now_ms` says:
///
/// - a clock up to `max_backward_ms` behind is absorbed by continuing from the last tick;
///   further behind is [`Error::ClockBackward`] (carrying how far);
/// - when a tick's sequence is used up it returns [`Next::Wait`] until the next tick, or
///   borrows up to `borrow_ms` of future ticks if configured;
/// - it can start above a high-water mark, and it never issues above its ceiling
///   ([`set_ceiling_ms`](Self::set_ceiling_ms)), which is how the server keeps every issued
///   time below a durably stored mark.
///
/// Build one with the layout's constructor, such as [`Snowflake::generator`](crate::Snowflake::generator)
/// or [`Generator::custom`].
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Next, Snowflake};
///
/// let generator = Snowflake::generator(1, 2, &GeneratorConfig::default())?;
/// let t = Snowflake::EPOCH_MS + 1_000;
/// let a = generator.next(t)?.ready().unwrap();
/// let b = generator.next(t)?.ready().unwrap();
/// assert!(b > a);
///
/// // 4,096 IDs per millisecond; the 4,097th must wait for the next one.
/// let batch = generator.next_batch(t, 10_000)?.ready().unwrap();
/// assert_eq!(batch.len(), 4094);
/// assert_eq!(generator.next(t)?, Next::Wait { until_ms: t + 1 });
/// # Ok::<(), idmint_core::Error>(())
/// ```
pub struct Generator<I = u64> {
    seq: Sequencer,
    packer: Packer,
    _id: PhantomData<fn() -> I>,
}

impl<I> fmt::Debug for Generator<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("last_tick", &self.seq.last_tick())
            .field("ceiling", &self.seq.ceiling())
            .field("timing", self.seq.timing())
            .finish()
    }
}

impl<I: GeneratedId> Generator<I> {
    /// Builds a generator from a layout's plan and a clock policy.
    pub(crate) fn from_plan(plan: Plan, config: &GeneratorConfig) -> Result<Self, Error> {
        // A type that runs on a compiled shape must be built with that very shape: its hot
        // path reads the constants, its other paths the plan.
        if I::SHAPE.is_some_and(|shape| shape != plan.shape()) {
            return Err(Error::InvalidLayout(
                "this ID type's generator is compiled for another shape than the plan's".to_owned(),
            ));
        }
        let seq_bits = plan.packer.seq_bits;
        let max_tick = if plan.time_wraps {
            u64::MAX >> seq_bits
        } else {
            low_mask(plan.time_bits).min(u64::MAX >> seq_bits)
        };
        let seq =
            sequencer(config, plan.epoch_ms, plan.tick_ms, max_tick, seq_bits, plan.seq_limit)?;
        Ok(Generator { seq, packer: plan.packer, _id: PhantomData })
    }

    /// The next ID at time `now_ms` (Unix milliseconds).
    ///
    /// # Errors
    ///
    /// - [`Error::ClockBackward`]: `now_ms` is further behind the last issued tick than allowed;
    /// - [`Error::BeforeEpoch`]: `now_ms` is before the layout's epoch;
    /// - [`Error::TimeExhausted`]: the layout's time field has run out;
    /// - [`Error::WindowExhausted`]: the next ID would lie above the ceiling.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
    /// let t = Snowflake::EPOCH_MS + 10_000;
    /// generator.next(t)?;
    /// // 500 ms back: absorbed, the ID continues from the last tick.
    /// assert!(generator.next(t - 500)?.ready().is_some());
    /// // 5 s back: refused, with the size of the step.
    /// assert!(matches!(generator.next(t - 5_000), Err(Error::ClockBackward { behind_ms: 5_000, .. })));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[inline]
    pub fn next(&self, now_ms: u64) -> Result<Next<I>, Error> {
        match I::SHAPE {
            // A compiled shape: its two common cases inline, on constants; the rest out of line.
            Some(shape) => match self.try_next(shape, now_ms) {
                Some(raw) => Ok(Next::Ready(I::from_generated(raw))),
                None => self.next_in_full(now_ms),
            },
            // A shape read at run time: the whole sequencer inline, which measured faster than
            // the split there (criterion: flake 3.3 against 4.7-5.0 ns, lable 4.4 against 5.5).
            None => self.next_full(now_ms),
        }
    }

    /// Every case of [`next`](Self::next).
    #[inline]
    fn next_full(&self, now_ms: u64) -> Result<Next<I>, Error> {
        Ok(self.seq.next(now_ms)?.map(|pair| I::from_generated(self.packer.pack(pair))))
    }

    /// [`next_full`](Self::next_full) out of line: the clock behind or before the epoch, a
    /// used-up tick, the ceiling, a lost race.
    #[inline(never)]
    fn next_in_full(&self, now_ms: u64) -> Result<Next<I>, Error> {
        self.next_full(now_ms)
    }

    /// The raw ID of [`next`](Self::next) in its two common cases, on `shape` (this
    /// generator's, as constants); `None` sends the call to the full path.
    #[inline(always)]
    pub(crate) fn try_next(&self, shape: Shape, now_ms: u64) -> Option<u64> {
        let pair = self.seq.try_next(shape, now_ms)?;
        Some(shape.kind.pack(shape.seq_bits, self.packer.node_bits, pair))
    }

    /// This generator's shape, read from it.
    #[inline(always)]
    pub(crate) fn shape(&self) -> Shape {
        let timing = self.seq.timing();
        Shape {
            epoch_ms: timing.epoch_ms,
            tick_ms: timing.tick_ms,
            seq_bits: self.packer.seq_bits,
            seq_limit: self.seq.seq_limit(),
            kind: self.packer.kind,
        }
    }

    /// Reserves up to `n` consecutive IDs in one atomic step.
    ///
    /// The batch holds as many IDs as the allowed ticks still have, at least one and at most
    /// `n`: call again for the rest. Its IDs are in increasing order and above every ID
    /// issued before.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next), plus [`Error::EmptyBatch`] when `n` is 0.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
    /// let batch = generator.next_batch(Snowflake::EPOCH_MS + 1, 100)?.ready().unwrap();
    /// let ids: Vec<Snowflake> = batch.collect();
    /// assert_eq!(ids.len(), 100);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<Batch<I>>, Error> {
        Ok(self.seq.reserve(now_ms, n)?.map(|(first, count)| Batch {
            pair: first,
            remaining: count,
            seq_limit: self.seq.seq_limit(),
            packer: self.packer,
            id: self.packer.pack(first),
            step: self.packer.step(),
            _id: PhantomData,
        }))
    }

    /// The Unix ms at which the last issued tick begins (or the start point, before any ID).
    ///
    /// A server persists a high-water mark at or above this before it lets IDs out.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
    /// generator.next(Snowflake::EPOCH_MS + 42)?;
    /// assert_eq!(generator.last_ms(), Snowflake::EPOCH_MS + 42);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn last_ms(&self) -> u64 {
        self.seq.time_of(self.seq.last_tick())
    }

    /// Allows IDs only in ticks that start at or before `mark_ms` (Unix ms).
    ///
    /// The server sets this to its durable high-water mark and raises it as it extends the mark.
    /// Lowering it is allowed too (for example when a lease is lost).
    ///
    /// # Errors
    ///
    /// [`Error::BeforeEpoch`] when `mark_ms` is before the layout's epoch.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
    /// let t = Snowflake::EPOCH_MS + 1_000;
    /// generator.set_ceiling_ms(t)?;
    /// assert!(generator.next(t)?.ready().is_some());
    /// assert!(matches!(generator.next(t + 1), Err(Error::WindowExhausted { .. })));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error> {
        self.seq.set_ceiling(self.seq.tick_of(mark_ms)?);
        Ok(())
    }

    /// The last Unix ms that may currently be issued: the end of the ceiling's tick, or of the
    /// layout's time field.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
    /// assert_eq!(generator.ceiling_ms(), Snowflake::EPOCH_MS + (1 << 41) - 1);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn ceiling_ms(&self) -> u64 {
        self.seq.time_of(self.seq.ceiling().saturating_add(1)).saturating_sub(1)
    }

    /// How many IDs one tick holds.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
    /// assert_eq!(generator.ids_per_tick(), 4096);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn ids_per_tick(&self) -> u64 {
        self.seq.seq_limit()
    }
}

impl Generator<u64> {
    /// A generator of raw IDs for any bit layout with a time field, a sequence field and node
    /// fields, custom layouts included. Node fields not named in `node` are 0.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownField`] or [`Error::FieldOutOfRange`] for a bad node value,
    /// [`Error::InvalidLayout`] for a layout a plain generator cannot fill (such as
    /// [`TraceId::LAYOUT`](crate::TraceId::LAYOUT), which has its own), and
    /// [`Error::InvalidConfig`] for a bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Generator, GeneratorConfig, Snowflake};
    ///
    /// let generator =
    ///     Generator::custom(&Snowflake::LAYOUT, &[("worker", 3)], &GeneratorConfig::default())?;
    /// let raw = generator.next(Snowflake::EPOCH_MS + 1)?.ready().unwrap();
    /// assert_eq!(Snowflake::from_raw(raw)?.into_parts().worker, 3);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn custom(
        layout: &crate::BitLayout,
        node: &[(&str, u64)],
        config: &GeneratorConfig,
    ) -> Result<Self, Error> {
        Generator::from_plan(layout.plan(layout.node_bits(node)?)?, config)
    }
}

/// [`Generator::try_next`] on `I`'s compiled shape; `None` (the full path) for a type without
/// one.
#[inline(always)]
pub(crate) fn try_next_as<I: GeneratedId>(generator: &Generator<u64>, now_ms: u64) -> Option<u64> {
    generator.try_next(I::SHAPE?, now_ms)
}

/// A contiguous run of IDs reserved by [`Generator::next_batch`], yielded in increasing order.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Snowflake};
///
/// let generator = Snowflake::generator(0, 0, &GeneratorConfig::default())?;
/// let mut batch = generator.next_batch(Snowflake::EPOCH_MS + 1, 3)?.ready().unwrap();
/// assert_eq!(batch.len(), 3);
/// let first = batch.next().unwrap();
/// assert_eq!(first.into_parts().sequence, 0);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Batch<I = u64> {
    pair: u64,
    remaining: u64,
    seq_limit: u64,
    packer: Packer,
    /// The packed ID of `pair`, kept up to date when `step` is not 0.
    id: u64,
    /// How much the packed ID grows from one sequence value to the next within a tick, or 0
    /// when it does not grow by a constant (TraceId) and every ID is packed afresh.
    step: u64,
    _id: PhantomData<fn() -> I>,
}

impl<I> fmt::Debug for Batch<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("pair", &self.pair)
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl<I: GeneratedId> Iterator for Batch<I> {
    type Item = I;

    #[inline]
    fn next(&mut self) -> Option<I> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        // A compiled shape's constants where the type has one (see `Generator::next`), the
        // batch's own copies otherwise: the same values.
        let (kind, seq_bits, seq_limit, step) = match I::SHAPE {
            Some(shape) => (shape.kind, shape.seq_bits, shape.seq_limit, shape.kind.step()),
            None => (self.packer.kind, self.packer.seq_bits, self.seq_limit, self.step),
        };
        let node_bits = self.packer.node_bits;
        let raw = if step == 0 { kind.pack(seq_bits, node_bits, self.pair) } else { self.id };
        let mask = (1 << seq_bits) - 1;
        if (self.pair & mask) + 1 < seq_limit {
            // Same tick: the next ID is this one plus a constant.
            self.pair += 1;
            self.id = self.id.wrapping_add(step);
        } else if self.remaining > 0 {
            self.pair = ((self.pair >> seq_bits) + 1) << seq_bits;
            self.id = kind.pack(seq_bits, node_bits, self.pair);
        }
        Some(I::from_generated(raw))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl<I> Batch<I> {
    /// Hands every remaining raw ID to `f`, in increasing order, and empties the batch: one
    /// tight loop per tick (an add per ID where the layout grows by a constant step within a
    /// tick, a pack per ID where it does not), with no per-ID branch on the tick's end. The
    /// bulk drain behind [`AnyBatch::write_be`](crate::AnyBatch::write_be) and
    /// [`AnyBatch::extend_u64s`](crate::AnyBatch::extend_u64s); yields exactly what
    /// [`Iterator::next`] would.
    #[inline]
    pub(crate) fn drain_raw(&mut self, mut f: impl FnMut(u64)) {
        let seq_bits = self.packer.seq_bits;
        let mask = (1u64 << seq_bits) - 1;
        while self.remaining > 0 {
            // The IDs left in this tick: its sequence values from here to `seq_limit - 1`
            // (at least one, as `next` yields one before it moves on).
            let in_tick = self.seq_limit.saturating_sub(self.pair & mask).clamp(1, self.remaining);
            if self.step == 0 {
                for i in 0..in_tick {
                    f(self.packer.pack(self.pair + i));
                }
            } else {
                let mut id = self.id;
                for _ in 0..in_tick {
                    f(id);
                    id = id.wrapping_add(self.step);
                }
            }
            self.remaining -= in_tick;
            if self.remaining > 0 {
                self.pair = ((self.pair >> seq_bits) + 1) << seq_bits;
                self.id = self.packer.pack(self.pair);
            }
        }
    }
}

impl<I: GeneratedId> ExactSizeIterator for Batch<I> {}
impl<I: GeneratedId> std::iter::FusedIterator for Batch<I> {}
