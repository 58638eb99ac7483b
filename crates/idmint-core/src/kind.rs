//! The private trait each kind of layout implements in its own file, and the two properties
//! of a layout that other crates need: [`Order`] and [`IssuedBy`].

use std::{any::Any, fmt, sync::Arc};

use crate::{
    any::{AnyGenerator, AnyId},
    error::Error,
    field::{FieldInfo, FieldReader, FieldValue, Segment},
    format::Format,
    generator::GeneratorConfig,
};

/// The order in which one generator (or one store) issues a layout's IDs.
///
/// The first three are the levels of monotonicity in Actoromicon's "ID generation" chapter
/// (elfo's book): *full* ([`Increasing`](Order::Increasing)), *periodic* and *sharded*. Two
/// more say what is left when several issuers share the IDs, or none orders them.
///
/// | order | one generator's IDs | a batch | from one batch to the next |
/// | --- | --- | --- | --- |
/// | `increasing` | increase for the life of the system, across restarts | increases | increases |
/// | `periodic` | increase until the time field wraps, then start low again | increases, unless it spans the wrap | increases, but at the wrap |
/// | `sharded` | increase within a shard (DecimalId: one generator ID of one launch); each new shard starts low | increases (a batch never spans shards) | may go down |
/// | `k-sorted` | several issuers with their own clocks interleave: roughly by time | increases | may go down |
/// | `unordered` | no numeric order | no order | no order |
///
/// # Example
///
/// ```
/// use idmint_core::{Layout, Order};
///
/// assert_eq!(Layout::builtin("snowflake")?.order(), Order::Increasing);
/// assert_eq!(Layout::builtin("trace-id")?.order(), Order::Periodic);
/// assert_eq!(Layout::builtin("decimal-id")?.order(), Order::Sharded);
/// assert_eq!(Layout::builtin("lable")?.order(), Order::Unordered);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Order {
    /// Full monotonicity: every ID of a generator is greater than the one it issued before,
    /// through restarts (time, or a counter, in the most significant bits, a durable mark,
    /// node fields fixed).
    Increasing,
    /// Periodic monotonicity: increasing until the time field wraps around (`trace-id`'s
    /// seconds, every 2^25 s), then again from low values.
    Periodic,
    /// Sharded monotonicity: increasing within a shard only; a source moves to a new shard,
    /// which starts low (`decimal-id`: a new generator ID at every start and whenever the
    /// counter part runs out). A batch never spans two shards.
    Sharded,
    /// Several issuers with their own clocks share the IDs (icicle on several Redis nodes,
    /// several generator IDs in one namespace): each batch increases, and batches follow
    /// time only roughly.
    KSorted,
    /// No numeric order (`lable` in spread mode reverses the bits of its time).
    Unordered,
}

impl Order {
    /// Every order, in the table's order.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Order::ALL.len(), 5);
    /// ```
    pub const ALL: [Order; 5] =
        [Order::Increasing, Order::Periodic, Order::Sharded, Order::KSorted, Order::Unordered];

    /// The order's name, as JSON and gRPC carry it: `increasing`, `periodic`, `sharded`,
    /// `k-sorted` or `unordered`.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Order::KSorted.name(), "k-sorted");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Order::Increasing => "increasing",
            Order::Periodic => "periodic",
            Order::Sharded => "sharded",
            Order::KSorted => "k-sorted",
            Order::Unordered => "unordered",
        }
    }

    /// What the order promises, in one line (for `idmint explain`).
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::Order::Sharded.describe().contains("within a shard"));
    /// ```
    pub const fn describe(self) -> &'static str {
        match self {
            Order::Increasing => {
                "each id of a generator is above the one before, for the life of the system"
            }
            Order::Periodic => {
                "increasing until the time field wraps around, then again from low values"
            }
            Order::Sharded => {
                "increasing within a shard (one generator id and launch); new shards start low"
            }
            Order::KSorted => {
                "issuers interleave: each batch increases, batches follow time only roughly"
            }
            Order::Unordered => "no numeric order",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Order {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        Order::ALL
            .into_iter()
            .find(|o| o.name() == text)
            .ok_or_else(|| Error::InvalidConfig(format!("unknown order `{text}`")))
    }
}

/// What issues a layout's IDs.
///
/// # Example
///
/// ```
/// use idmint_core::{IssuedBy, Layout};
///
/// assert_eq!(Layout::builtin("icicle")?.issued_by(), IssuedBy::Clock);
/// assert_eq!(Layout::builtin("decimal-id")?.issued_by(), IssuedBy::Counters);
/// assert_eq!(Layout::builtin("sequence")?.issued_by(), IssuedBy::Store);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssuedBy {
    /// A generator that reads a clock, under a claimed generator ID.
    Clock,
    /// A generator without a clock whose launch and generator IDs come from persistent
    /// counters (`decimal-id`).
    Counters,
    /// A store that hands out ranges of plain integers (`sequence`); there is no generator.
    Store,
}

/// What one kind of layout knows about itself. Each kind implements it in its own file;
/// [`Layout`](crate::Layout) dispatches to it and checks what is common to all kinds first
/// (the ID's width for `decode`, the generator ID's range, the names of given fields).
pub(crate) trait LayoutKind: fmt::Debug + Send + Sync + Any {
    /// The layout's name.
    fn name(&self) -> &str;
    /// The ID's width: 64 or 128.
    fn id_bits(&self) -> u32 {
        64
    }
    /// The usual text form.
    fn default_format(&self) -> Format {
        Format::Decimal
    }
    /// A text the original program prints or reads that the strict parsers refuse (go-flakeid's
    /// unpadded hex, .NET's other `Guid` forms), as an ID of the layout's width; `None` when
    /// the layout's original has no such form for `format`.
    fn parse_upstream(&self, _text: &str, _format: Format) -> Option<Result<AnyId, Error>> {
        None
    }
    /// The epoch of the time field in Unix ms, if there is a time field.
    fn epoch_ms(&self) -> Option<u64>;
    /// The same layout with another epoch, or `None` when the epoch is fixed.
    fn with_epoch(&self, _epoch_ms: u64) -> Option<Result<Arc<dyn LayoutKind>, Error>> {
        None
    }
    /// The same layout with another counter width (TraceId's chunk/counter split), or `None`
    /// when the layout has no such parameter.
    fn with_counter_bits(&self, _counter_bits: u32) -> Option<Result<Arc<dyn LayoutKind>, Error>> {
        None
    }
    /// Whether every ID is at most 2^53−1.
    fn is_js_safe(&self) -> bool {
        false
    }
    /// The fields, in the order `decode` returns them.
    fn fields(&self) -> Vec<FieldInfo>;
    /// The bit diagram, if the layout is a bit layout.
    fn segments(&self) -> Option<Vec<Segment>>;
    /// Lifetime and rate.
    fn capacity(&self) -> Capacity;
    /// An ID from named values (already checked to be fields of the layout).
    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error>;
    /// The fields of an ID of the layout's width, after validating it.
    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error>;
    /// The Unix ms of a valid ID, if the layout records time.
    fn time_ms(&self, id: AnyId, now_ms: u64) -> Result<Option<u64>, Error>;
    /// A text that identifies the layout's bits and time.
    fn fingerprint(&self) -> String;
    /// How many generator IDs there are.
    fn generator_count(&self) -> u64;
    /// The node fields of a generator ID below `generator_count`.
    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)>;
    /// A generator whose identity fields come from `generator_id` (below `generator_count`),
    /// or, without one, from `values`; other node fields come from `values`.
    fn generator_for(
        &self,
        generator_id: Option<u64>,
        values: FieldReader,
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error>;
    /// The order of one generator's IDs.
    fn order(&self) -> Order;
    /// What issues the IDs.
    fn issued_by(&self) -> IssuedBy;
    /// Whether a generator takes a shard key per call
    /// ([`AnyGenerator::next_batch_with_shard_key`]).
    fn takes_shard_key(&self) -> bool {
        false
    }
    /// Whether `other` is the same layout.
    fn same(&self, other: &dyn LayoutKind) -> bool;
}

/// What a layout can hold, as `idmint explain` prints it.
///
/// Times are Unix milliseconds with an RFC 3339 rendering. A layout "runs out" at
/// [`end_ms`](Self::end_ms): the first instant its time field cannot represent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Capacity {
    /// The length of one tick, in milliseconds.
    pub tick_ms: u64,
    /// The first representable time (the epoch), if the layout has a time field.
    pub start_ms: Option<u64>,
    /// The first time the layout cannot represent: the day it runs out. `None` if it wraps.
    pub end_ms: Option<u64>,
    /// The period after which the time field wraps around, if it wraps.
    pub wrap_ms: Option<u64>,
    /// [`start_ms`](Self::start_ms) as RFC 3339.
    pub start: Option<String>,
    /// [`end_ms`](Self::end_ms) as RFC 3339.
    pub end: Option<String>,
    /// How many IDs one generator can issue per tick.
    pub ids_per_tick: u64,
    /// How many IDs one generator can issue per second.
    pub ids_per_second_per_generator: u64,
    /// How many generators can issue IDs at once (the product of the node fields' ranges).
    pub generators: u64,
}

/// A built-in layout, as its own file declares it and the registry lists it.
#[derive(Clone, Copy)]
pub(crate) struct Builtin {
    /// The name `Layout::builtin` takes.
    pub(crate) name: &'static str,
    /// One line for `idmint layouts`.
    pub(crate) about: &'static str,
    /// Makes the layout.
    pub(crate) make: fn() -> Arc<dyn LayoutKind>,
}

/// Refuses a generator ID that is not below `count` (a layout's `generator_count`).
pub(crate) fn check_generator_id(generator_id: u64, count: u64) -> Result<(), Error> {
    if generator_id >= count {
        return Err(Error::out_of_range("generator id", generator_id, 0, count - 1));
    }
    Ok(())
}

/// `same` for kinds that compare with `PartialEq`.
pub(crate) fn same_as<T: LayoutKind + PartialEq>(this: &T, other: &dyn LayoutKind) -> bool {
    (other as &dyn Any).downcast_ref::<T>() == Some(this)
}

/// The capacity of a layout without a clock: `ids` IDs per generator, no dates, no rate.
pub(crate) fn clockless_capacity(ids: u64, generators: u64) -> Capacity {
    Capacity {
        tick_ms: 0,
        start_ms: None,
        end_ms: None,
        wrap_ms: None,
        start: None,
        end: None,
        ids_per_tick: ids,
        ids_per_second_per_generator: 0,
        generators,
    }
}
