//! `idmint-core`: ID layouts, a lock-free sans-I/O generator, and text formats.
//!
//! This crate does no I/O, has no async and never sleeps. Time is an input: every generator
//! call takes `now_ms` (Unix milliseconds) and answers with an ID, a time to wait until
//! ([`Next::Wait`]), or an [`Error`]. The edges (the `idmint-runtime` crate, the server, the
//! CLI) read clocks and do the waiting.
//!
//! # Getting started
//!
//! ```
//! use idmint_core::{GeneratorConfig, Next, Snowflake};
//!
//! // One generator per (datacenter, worker); share it between threads by reference.
//! let generator = Snowflake::generator(1, 7, &GeneratorConfig::default())?;
//! let now_ms = Snowflake::EPOCH_MS + 1_000; // in real code: the clock
//! let id = match generator.next(now_ms)? {
//!     Next::Ready(id) => id,
//!     Next::Wait { until_ms } => unreachable!("a fresh generator never waits ({until_ms})"),
//! };
//! assert_eq!(id.into_parts().worker, 7);
//! assert_eq!(id.to_string().parse::<Snowflake>()?, id);
//! # Ok::<(), idmint_core::Error>(())
//! ```
//!
//! # Which layout should I use?
//!
//! | you need | use | why |
//! | --- | --- | --- |
//! | a 64-bit ID for a new system, sortable by time | [`Snowflake`] | 69 years, 4,096 IDs/ms per generator, 1,024 generators, positive `i64` |
//! | IDs that JavaScript can hold as numbers | [`Js53`] | every ID ≤ 2^53−1; 64 generators, 128 IDs/ms each, until 2060 |
//! | compatibility with an existing system | [`Lable`], [`Flake`], [`Icicle`], [`Sonyflake`], [`SonyflakeV2`], [`TraceId`], [`HotGuid`] | byte-exact with LableOrg, go-flakeid, icicle, Sonyflake (v1 and v2), elfo and HotGuid |
//! | tracing or log IDs, very fast, unique for a year | [`TraceId`] | 4.19 M IDs/s per node; the seconds wrap every 388 days |
//! | IDs people read aloud, no clock at all | [`DecimalId`] | `counter·10^10 + generator·10^5 + launch` |
//! | plain, dense integers handed out by a database | the `sequence` [`Layout`] | 1..=2^63−1, no clock; IDs come from a segment store (`idmint-coord`), not a generator |
//! | a UUID primary key, sortable by time, unique across a fleet by construction | [`Uuid7`] | RFC 9562 UUIDv7: 4,096 IDs/ms per generator, 65,536 generators, 46 random bits; UUID, ULID or TypeID text |
//! | a shard key inside a GUID | [`HotGuid`] | 128-bit .NET Guid ordered by time, with a 32-bit shard key |
//! | row keys spread evenly over a key-value store | [`Lable`] in [`LableMode::Spread`] | the bit-reversed timestamp scatters consecutive IDs |
//! | your own bit widths, tick and epoch | [`BitLayout`] from a [`LayoutConfig`] | validated, with a lifetime and capacity calculator ([`BitLayout::capacity`]) |
//!
//! Every 64-bit layout issues IDs in 1..=2^63−1 (positive `i64` values, never 0) except where
//! upstream compatibility needs bit 63: [`Flake`] (from 2039 with its default epoch) and
//! [`Lable`] (SPREAD IDs of odd milliseconds).
//!
//! # Guarantees
//!
//! A [`Generator`] keeps its last (tick, sequence) pair in one atomic word and moves it strictly
//! up with compare-and-swap, so it never issues the same ID twice and never goes below its last
//! ID, whatever the clock does. Small backward clock steps are absorbed, large ones are an error
//! that carries their size, an exhausted tick returns a time to wait until, and a generator can
//! start above a persisted high-water mark and stop below a ceiling.
//!
//! # Text
//!
//! Every ID type has `Display`/`FromStr` in its layout's usual form and
//! `to_text`/`parse_text` in any [`Format`]. 128-bit IDs are also written as ULIDs and TypeIDs
//! ([`Text128`]; a [`Uuid7`] defaults to the hyphenated UUID). With the `serde` feature (on by default) IDs
//! serialize as strings, so JavaScript never rounds them.
//!
//! # Layouts chosen at run time
//!
//! [`Layout`] names any built-in or custom layout and encodes, decodes, parses, explains and
//! generates it without knowing its type at compile time. The CLI and the server use it.
//!
//! # IDs of unknown origin
//!
//! [`detect`] names what an ID is: every built-in layout, and UUID v1–v8, ULID, KSUID, xid,
//! ObjectId, SCRU128, TSID, Discord, Instagram and Mastodon IDs, each with its fields and time,
//! most plausible first (`idmint decode --layout auto`).

mod any;
mod bits;
mod clock;
mod compiled;
mod decimal_id;
mod detect;
mod error;
mod field;
mod flake;
mod format;
mod generator;
mod hot_guid;
mod icicle;
mod id_impl;
mod id_text;
mod js53;
mod kind;
mod lable;
mod layout;
mod lifetime;
mod named;
mod next;
mod pack;
mod public_id;
mod random;
mod sequence;
mod sequence_layout;
mod snowflake;
mod sonyflake;
mod sonyflake_v2;
mod splitmix;
mod stride;
mod text128;
mod time_fmt;
mod trace_id;
mod uuid7;

#[cfg(any(test, feature = "test-util"))]
pub use crate::clock::ManualClock;
#[cfg(idmint_negative_controls)]
pub use crate::clock::disable_clock_guard_for_tests;
pub use crate::{
    any::{AnyBatch, AnyGenerator, AnyId},
    bits::{BitField, BitLayout, FieldConfig, LayoutConfig},
    clock::{Anchor, Clock, SystemClock},
    decimal_id::{DecimalId, DecimalIdBatch, DecimalIdGenerator, DecimalIdParts},
    detect::{Candidate, DetectedField, PLAUSIBLE_FROM_MS, detect},
    error::Error,
    field::{FieldInfo, FieldRole, FieldValue, Segment},
    flake::{Flake, FlakeParts},
    format::Format,
    generator::{
        BORROW_LIMIT_MS, Batch, GeneratedId, Generator, GeneratorConfig, MAX_BACKWARD_LIMIT_MS,
        Next,
    },
    hot_guid::{HotGuid, HotGuidBatch, HotGuidGenerator, HotGuidParts},
    icicle::{Icicle, IcicleParts},
    id_text::{IdForm, IdText},
    js53::{Js53, Js53Parts},
    kind::{Capacity, IssuedBy, Order},
    lable::{Lable, LableMode, LableParts},
    layout::Layout,
    public_id::{MAX_VERSION_BITS, PublicIdKey, PublicIdKeys, PublicIdMethod, PublicIds},
    snowflake::{Snowflake, SnowflakeParts},
    sonyflake::{Sonyflake, SonyflakeParts},
    sonyflake_v2::SonyflakeV2,
    splitmix::SplitMix64,
    stride::GeneratorStride,
    text128::{Text128, TypePrefix, parse_typeid, typeid_text},
    time_fmt::{format_rfc3339_ms, parse_rfc3339_ms},
    trace_id::{ChunkRegistry, ChunkedTraceIdGenerator, TraceId, TraceIdParts, TraceIdValidator},
    uuid7::{Uuid7, Uuid7Batch, Uuid7Generator, Uuid7Parts, Uuid7Split},
};
