//! The registry of layouts chosen at run time: [`Layout`] names a built-in or custom layout and
//! hands every question to its kind, which answers in its own file. The CLI and the server use
//! it; library users who know their layout at compile time use the typed IDs instead.

use std::sync::{Arc, OnceLock};

use crate::{
    any::{AnyGenerator, AnyId},
    bits::BitLayout,
    error::Error,
    field::{FieldInfo, FieldReader, FieldValue, Segment, is_node},
    format::Format,
    generator::GeneratorConfig,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, check_generator_id},
    stride::GeneratorStride,
};

/// A layout chosen at run time: one of the built-ins by name, or a custom [`BitLayout`].
///
/// [`builtins`](Self::builtins) lists the built-ins; the crate's documentation says which to use.
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, FieldValue, Format, Layout};
///
/// let layout = Layout::builtin("flake")?;
/// let fields = layout.decode(layout.parse("5828128208445124609", Format::Decimal)?)?;
/// assert_eq!(fields[1], ("datacenter".to_string(), FieldValue::Number(7)));
/// assert_eq!(layout.encode(&fields)?, AnyId::U64(5_828_128_208_445_124_609));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Layout {
    kind: Arc<dyn LayoutKind>,
}

impl PartialEq for Layout {
    fn eq(&self, other: &Self) -> bool {
        self.kind.same(&*other.kind)
    }
}

impl Eq for Layout {}

/// The registry: every built-in layout, one line each; each is described in its own file.
const BUILTINS: &[Builtin] = &[
    crate::snowflake::BUILTIN,
    crate::sonyflake::BUILTIN,
    crate::icicle::BUILTIN,
    crate::flake::BUILTIN,
    crate::lable::BUILTIN,
    crate::trace_id::BUILTIN,
    crate::decimal_id::BUILTIN,
    crate::hot_guid::BUILTIN,
    crate::js53::BUILTIN,
    crate::sequence_layout::BUILTIN,
    crate::sonyflake_v2::BUILTIN,
    crate::uuid7::BUILTIN,
];

impl Layout {
    /// The names of the built-in layouts and a one-line description of each.
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::Layout::builtins().iter().any(|(name, _)| *name == "js53"));
    /// ```
    pub fn builtins() -> &'static [(&'static str, &'static str)] {
        static LIST: OnceLock<Vec<(&str, &str)>> = OnceLock::new();
        LIST.get_or_init(|| BUILTINS.iter().map(|b| (b.name, b.about)).collect())
    }

    /// A built-in layout by name.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLayout`] for any other name.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Layout::builtin("icicle")?.name(), "icicle");
    /// assert!(idmint_core::Layout::builtin("nope").is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn builtin(name: &str) -> Result<Self, Error> {
        match BUILTINS.iter().find(|b| b.name == name) {
            Some(b) => Ok(Layout { kind: (b.make)() }),
            None => Err(Error::UnknownLayout {
                name: name.to_owned(),
                expected: BUILTINS.iter().map(|b| b.name).collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// A custom layout.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Snowflake};
    ///
    /// assert_eq!(Layout::custom(Snowflake::LAYOUT).name(), "snowflake");
    /// ```
    pub fn custom(layout: BitLayout) -> Self {
        Layout { kind: Arc::new(layout) }
    }

    /// A layout of a kind that is not a bit layout (a `uuid7` split, ...).
    pub(crate) fn from_kind(kind: Arc<dyn LayoutKind>) -> Self {
        Layout { kind }
    }

    /// The same layout with another epoch (Unix ms), for layouts whose time counts from one.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] for layouts whose epoch is fixed, or that have no clock.
    ///
    /// # Example
    ///
    /// ```
    /// let layout = idmint_core::Layout::builtin("flake")?.with_epoch(946_684_800_000)?;
    /// assert_eq!(layout.epoch_ms(), Some(946_684_800_000));
    /// assert!(idmint_core::Layout::builtin("trace-id")?.with_epoch(1).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn with_epoch(&self, epoch_ms: u64) -> Result<Self, Error> {
        match self.kind.with_epoch(epoch_ms) {
            Some(kind) => Ok(Layout { kind: kind? }),
            None => Err(Error::InvalidLayout(format!(
                "layout `{}` has no configurable epoch",
                self.name()
            ))),
        }
    }

    /// The same layout with another split of its sequence: `trace-id` only, whose 22 bits
    /// below the node number are a chunk number (elfo's per-thread chunk) and a counter that
    /// is never 0. elfo's split, the default, is 12 bits of chunk and 10 of counter
    /// ([`TraceId::DEFAULT_COUNTER_BITS`](crate::TraceId::DEFAULT_COUNTER_BITS)); `counter_bits`
    /// may be 1..=21. Another split is another layout: its fingerprint differs, so a claim
    /// made under one split is refused under another.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] for another layout, or a width outside 1..=21.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout};
    ///
    /// let elfo = Layout::builtin("trace-id")?;
    /// assert_eq!(elfo.with_counter_bits(10)?, elfo);
    /// let wide = elfo.with_counter_bits(16)?;
    /// assert_eq!(wide.capacity().ids_per_second_per_generator, 64 * 65_535);
    /// let id = wide.generator(&[], &GeneratorConfig::default())?.next(1_700_000_000_000)?.ready().unwrap();
    /// let fields = wide.decode(id)?;
    /// assert_eq!(fields[2].0, "chunk_no");
    /// assert_eq!(fields[3], ("counter".to_owned(), idmint_core::FieldValue::Number(1)));
    /// assert!(elfo.with_counter_bits(22).is_err());
    /// assert!(Layout::builtin("snowflake")?.with_counter_bits(10).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn with_counter_bits(&self, counter_bits: u32) -> Result<Self, Error> {
        match self.kind.with_counter_bits(counter_bits) {
            Some(kind) => Ok(Layout { kind: kind? }),
            None => Err(Error::InvalidLayout(format!(
                "layout `{}` has no counter width to set (only trace-id has)",
                self.name()
            ))),
        }
    }

    /// The layout's name.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Layout::builtin("hot-guid")?.name(), "hot-guid");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        self.kind.name()
    }

    /// Whether [`generator`](Self::generator) can make IDs of this layout: false when a store
    /// issues them (`sequence`, see [`issued_by`](Self::issued_by)).
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::Layout::builtin("snowflake")?.has_generator());
    /// assert!(!idmint_core::Layout::builtin("sequence")?.has_generator());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn has_generator(&self) -> bool {
        self.issued_by() != IssuedBy::Store
    }

    /// The order in which one generator (or store) issues the layout's IDs.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Order};
    ///
    /// assert_eq!(Layout::builtin("decimal-id")?.order(), Order::Sharded);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn order(&self) -> Order {
        self.kind.order()
    }

    /// What issues the layout's IDs: a generator with a clock, one fed by persistent counters,
    /// or a store of plain integers.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{IssuedBy, Layout};
    ///
    /// assert_eq!(Layout::builtin("snowflake")?.issued_by(), IssuedBy::Clock);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn issued_by(&self) -> IssuedBy {
        self.kind.issued_by()
    }

    /// Whether the layout's IDs carry a shard key that each call may choose
    /// ([`AnyGenerator::next_batch_with_shard_key`](crate::AnyGenerator::next_batch_with_shard_key)):
    /// true for `hot-guid` only.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// assert!(Layout::builtin("hot-guid")?.takes_shard_key());
    /// assert!(!Layout::builtin("icicle")?.takes_shard_key());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn takes_shard_key(&self) -> bool {
        self.kind.takes_shard_key()
    }

    /// The epoch of the time field in Unix ms, if the layout has one (fixed at 0 for `lable`,
    /// `trace-id` and `hot-guid`, whose [`with_epoch`](Self::with_epoch) refuses another).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Snowflake};
    ///
    /// assert_eq!(Layout::builtin("snowflake")?.epoch_ms(), Some(Snowflake::EPOCH_MS));
    /// assert_eq!(Layout::builtin("decimal-id")?.epoch_ms(), None);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn epoch_ms(&self) -> Option<u64> {
        self.kind.epoch_ms()
    }

    /// The ID's width: 128 for `hot-guid` and `uuid7`, 64 otherwise.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Layout::builtin("hot-guid")?.id_bits(), 128);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn id_bits(&self) -> u32 {
        self.kind.id_bits()
    }

    /// Whether every ID of the layout is at most 2^53−1, so a JSON number is safe in JavaScript.
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::Layout::builtin("js53")?.is_js_safe());
    /// assert!(!idmint_core::Layout::builtin("snowflake")?.is_js_safe());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn is_js_safe(&self) -> bool {
        self.kind.is_js_safe()
    }

    /// The layout's usual text form.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Format::Hex, Layout};
    /// assert_eq!(Layout::builtin("lable")?.default_format(), Hex);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn default_format(&self) -> Format {
        self.kind.default_format()
    }

    /// The layout's fields, in the order `decode` returns them.
    ///
    /// # Example
    ///
    /// ```
    /// let fields = idmint_core::Layout::builtin("decimal-id")?.fields();
    /// assert_eq!(fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["counter", "generator_id", "launch_id"]);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn fields(&self) -> Vec<FieldInfo> {
        self.kind.fields()
    }

    /// The bit diagram, most significant first; `None` for `decimal-id`, which is decimal.
    ///
    /// # Example
    ///
    /// ```
    /// let segments = idmint_core::Layout::builtin("hot-guid")?.segments().unwrap();
    /// assert_eq!(segments[0].msb, 127);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn segments(&self) -> Option<Vec<Segment>> {
        self.kind.segments()
    }

    /// What the layout can hold: its lifetime and its rate.
    ///
    /// # Example
    ///
    /// ```
    /// let cap = idmint_core::Layout::builtin("lable")?.capacity();
    /// assert_eq!(cap.ids_per_tick, 64);
    /// assert_eq!(cap.end.as_deref(), Some("2109-05-15T07:35:11.104Z"));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn capacity(&self) -> Capacity {
        self.kind.capacity()
    }

    /// Builds an ID from named field values. Every field must be given, and nothing else.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownField`], [`Error::MissingField`], [`Error::InvalidFieldValue`] or
    /// [`Error::FieldOutOfRange`]; values are never masked.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, FieldValue, Layout};
    ///
    /// let layout = Layout::builtin("decimal-id")?;
    /// let fields = [("counter", 1415), ("generator_id", 92), ("launch_id", 65)]
    ///     .map(|(name, value)| (name.to_string(), FieldValue::Number(value)));
    /// assert_eq!(layout.encode(&fields)?, AnyId::U64(14_150_009_200_065));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn encode(&self, fields: &[(String, FieldValue)]) -> Result<AnyId, Error> {
        let mut values = FieldReader::checked(self.name(), &self.fields(), fields, |_| true)?;
        self.kind.encode(&mut values)
    }

    /// Reads the fields of an ID, after checking it is a valid ID of this layout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] for an ID of the other width; else the layout's validation errors.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, FieldValue, Layout};
    ///
    /// let fields = Layout::builtin("lable")?.decode(AnyId::U64(0x1000))?;
    /// assert_eq!(fields[4], ("mode".to_string(), FieldValue::Text("time-sequential".into())));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        self.kind.decode(id.of_width(self.id_bits(), self.name())?)
    }

    /// Parses text in `format` (or a form of it the layout's original program prints: Go's
    /// unpadded hex for `flake`, .NET's N, B, P and X `Guid` forms for `hot-guid`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] or [`Error::UnsupportedFormat`] for text that is not a number of
    /// the layout's width in that format, and the layout's validation errors.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Format, Layout};
    ///
    /// let layout = Layout::builtin("lable")?;
    /// assert_eq!(layout.parse("0000000000001000", Format::Hex)?, AnyId::U64(0x1000));
    /// assert!(layout.parse("00ff", Format::Hex).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse(&self, text: &str, format: Format) -> Result<AnyId, Error> {
        let id = AnyId::parse(text, format, self.id_bits())
            .or_else(|e| self.kind.parse_upstream(text, format).unwrap_or(Err(e)))?;
        self.decode(id)?;
        Ok(id)
    }

    /// Writes an ID in `format`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] when the format cannot hold the ID.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Format, Layout};
    ///
    /// let id = AnyId::U64(6448830824900882437);
    /// assert_eq!(Layout::builtin("flake")?.format(id, Format::Base64Le)?, "BXDOxnfZflk=");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn format(&self, id: AnyId, format: Format) -> Result<String, Error> {
        let mut out = String::new();
        id.write(format, &mut out).map(|()| out)
    }

    /// The Unix ms an ID was issued at, if the layout records time. `now_ms` resolves
    /// `trace-id`'s wrapping seconds to the latest matching time up to a day after it.
    ///
    /// # Errors
    ///
    /// As [`decode`](Self::decode).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Layout};
    ///
    /// let id = AnyId::U64(5828128208445124609);
    /// assert_eq!(Layout::builtin("flake")?.time_ms(id, 0)?, Some(1_389_534_046_279));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn time_ms(&self, id: AnyId, now_ms: u64) -> Result<Option<u64>, Error> {
        self.decode(id)?;
        self.kind.time_ms(id, now_ms)
    }

    /// A text that identifies the layout's bits and time (name, width, epoch, tick, fields): a
    /// stored high-water mark is only valid for the same fingerprint.
    ///
    /// # Example
    ///
    /// ```
    /// let snowflake = idmint_core::Layout::builtin("snowflake")?;
    /// assert_ne!(snowflake.fingerprint(), snowflake.with_epoch(0)?.fingerprint());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn fingerprint(&self) -> String {
        self.kind.fingerprint()
    }

    /// How many generators can run at once: the [`identity`](Self::identity) values.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Layout::builtin("snowflake")?.generator_count(), 1024);
    /// assert_eq!(idmint_core::Layout::builtin("icicle")?.generator_count(), 1023);
    /// assert_eq!(idmint_core::Layout::builtin("lable")?.generator_count(), 2048 * 16);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator_count(&self) -> u64 {
        self.kind.generator_count()
    }

    /// The node-field values of generator identity `generator_id` (in `0..generator_count()`),
    /// so that a coordinator can hand out plain integers. Each layout documents its mapping
    /// (bit layouts: the node fields read as one number, most significant first).
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] when `generator_id` is not below
    /// [`generator_count`](Self::generator_count).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{FieldValue, Layout};
    ///
    /// let fields = Layout::builtin("snowflake")?.identity(33)?;
    /// assert_eq!(fields, [("datacenter", 1), ("worker", 1)].map(|(n, v)| (n.to_string(), FieldValue::Number(v))));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn identity(&self, generator_id: u64) -> Result<Vec<(String, FieldValue)>, Error> {
        check_generator_id(generator_id, self.generator_count())?;
        Ok(self.kind.identity(generator_id))
    }

    /// The generator IDs whose [`identity`](Self::identity) has the `fixed` values (a
    /// datacenter or cluster that deployment config fixes, while a coordinator hands out the
    /// rest), as an arithmetic progression.
    ///
    /// The identity fields left free must be adjacent in the order the layout packs them into
    /// a generator ID (for two fields, fix either one). Fixing none gives every generator ID;
    /// fixing all gives one.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownField`] for a field that is not part of the identity,
    /// [`Error::FieldOutOfRange`] or [`Error::InvalidFieldValue`] for a bad value, and
    /// [`Error::InvalidConfig`] when the free fields are not adjacent.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{FieldValue, GeneratorStride, Layout};
    ///
    /// let dc3 = [("datacenter".to_string(), FieldValue::Number(3))];
    /// let ids = Layout::builtin("snowflake")?.generator_ids_with(&dc3)?;
    /// assert_eq!(ids, GeneratorStride { first: 96, step: 1, count: 32 });
    /// // LableOrg's cluster is the high part of its generator IDs.
    /// let cluster5 = [("cluster_id".to_string(), FieldValue::Number(5))];
    /// let ids = Layout::builtin("lable")?.generator_ids_with(&cluster5)?;
    /// assert_eq!(ids, GeneratorStride { first: 5 * 2048, step: 1, count: 2048 });
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator_ids_with(
        &self,
        fixed: &[(String, FieldValue)],
    ) -> Result<GeneratorStride, Error> {
        crate::stride::generator_ids_with(self.name(), self.generator_count(), fixed, |id| {
            self.identity(id)
        })
    }

    /// A generator with the given node fields (datacenter, worker, shard, ...); node fields
    /// that are not given take their smallest value.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownField`] for a field that is not a node field, [`Error::FieldOutOfRange`]
    /// or [`Error::InvalidFieldValue`] for a bad value, [`Error::InvalidConfig`] for a bad
    /// configuration, [`Error::InvalidLayout`] for a layout without a generator (`sequence`).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, FieldValue, GeneratorConfig, Layout, Snowflake};
    ///
    /// let layout = Layout::builtin("snowflake")?;
    /// let node = [("worker".to_string(), FieldValue::Number(3))];
    /// let generator = layout.generator(&node, &GeneratorConfig::default())?;
    /// let id = generator.next(Snowflake::EPOCH_MS + 1)?.ready().unwrap();
    /// assert_eq!(id, AnyId::U64(1 << 22 | 3 << 12));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        &self,
        node: &[(String, FieldValue)],
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let values = FieldReader::checked(self.name(), &self.fields(), node, is_node)?;
        self.kind.generator_for(None, values, config)
    }

    /// A generator for generator ID `generator_id` (which sets the node fields of its
    /// [`identity`](Self::identity)), with other node fields from `fields`; nothing is parsed.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for an ID not below [`generator_count`](Self::generator_count),
    /// [`Error::InvalidFieldValue`] for a field the ID sets, and [`generator`](Self::generator)'s.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, GeneratorConfig, Layout, Snowflake};
    ///
    /// let (layout, config) = (Layout::builtin("snowflake")?, GeneratorConfig::default());
    /// let id = layout.generator_for(33, &[], &config)?.next(Snowflake::EPOCH_MS + 1)?.ready();
    /// assert_eq!(id, Some(AnyId::U64(1 << 22 | 1 << 17 | 1 << 12)));
    /// assert!(layout.generator_for(1024, &[], &config).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator_for(
        &self,
        generator_id: u64,
        fields: &[(String, FieldValue)],
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        check_generator_id(generator_id, self.generator_count())?;
        let values = FieldReader::checked(self.name(), &self.fields(), fields, is_node)?;
        self.kind.generator_for(Some(generator_id), values, config)
    }
}
