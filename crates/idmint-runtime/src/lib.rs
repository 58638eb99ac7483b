//! `idmint-runtime`: the edge that does the waiting for the sans-I/O generators of
//! `idmint-core`.
//!
//! A core generator takes the time as input and, when the current tick is used up, answers
//! [`Next::Wait { until_ms }`](idmint_core::Next::Wait) instead of sleeping. This crate reads a
//! clock, calls the generator, and waits until `until_ms` when told to, by blocking the thread
//! ([`BlockingGenerator`]). The server waits on its own (on Tokio, bounded by each request's
//! deadline and by its durable window), so there is no async waiter here.
//!
//! **Invariant:** it has no layout or sequencing logic: which ID comes next, and when, is
//! decided by the core. It is the only library crate that spawns a clock thread.
//!
//! # An ID now
//!
//! ```
//! let ids = idmint_runtime::SnowflakeGenerator::system(0, 1)?; // datacenter 0, worker 1
//! let id = ids.next()?;
//! println!("{id} was made at {} (Unix ms)", id.timestamp_ms());
//! # Ok::<(), idmint_runtime::Error>(())
//! ```
//!
//! # Getting started
//!
//! ```
//! use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
//! use idmint_runtime::BlockingGenerator;
//!
//! let source = Snowflake::generator(1, 7, &GeneratorConfig::default())?;
//! let generator = BlockingGenerator::new(source, SystemClock);
//!
//! let id = generator.next()?;
//! assert_eq!(id.into_parts().worker, 7);
//!
//! // Exactly n IDs, waiting for the next millisecond whenever one is used up.
//! let mut count = 0;
//! generator.fill(1_000, |_id| count += 1)?;
//! assert_eq!(count, 1_000);
//! # Ok::<(), idmint_runtime::Error>(())
//! ```
//!
//! # Which one should I use?
//!
//! | you are in | use | it waits with |
//! | --- | --- | --- |
//! | a CLI, a batch job, a thread that may block | [`BlockingGenerator`] | [`ThreadSleep`]: `thread::sleep` to the millisecond boundary |
//! | a benchmark | [`BlockingGenerator::with_wait`] and [`SpinWait`] | a busy loop on the clock |
//! | a hot loop that reads the clock millions of times a second | a [`TickingClock`] as the clock of either | (a clock, not a waiter: one atomic load per reading) |
//!
//! Any core generator works as the [`ClockDriven`]: [`Generator<I>`](idmint_core::Generator),
//! [`HotGuidGenerator`](idmint_core::HotGuidGenerator) and
//! [`AnyGenerator`](idmint_core::AnyGenerator), by value, by reference or in an `Arc`.
//!
//! # A clock that does not move
//!
//! Waiting can only end when the clock moves. If it does not move at all across a number of
//! waits in a row (100 by default), a call returns [`Error::ClockStalled`] rather than hanging:
//! LableOrg's "Clock supplied to generator failed to progress.", as an error value.

mod blocking;
mod clock_driven;
mod error;
mod stall;
mod system;
mod ticking;
mod wait;

pub use crate::{
    blocking::BlockingGenerator,
    clock_driven::ClockDriven,
    error::Error,
    system::SnowflakeGenerator,
    ticking::TickingClock,
    wait::{SpinWait, ThreadSleep, Wait},
};
