//! Bit-field layouts: named fields packed into a 63- or 64-bit integer, with range checks.
//!
//! Every built-in 64-bit layout that is a plain concatenation of fields (Snowflake, Sonyflake,
//! icicle, go-flakeid, js53, TraceId) is a constant [`BitLayout`], and custom layouts are
//! validated instances of the same type, so packing, unpacking and capacity are written once.

use std::{borrow::Cow, sync::Arc};

pub(crate) use crate::pack::low_mask;
use crate::{
    any::{AnyGenerator, AnyId},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    format::Format,
    generator::{Generator, GeneratorConfig},
    kind::{Capacity, IssuedBy, LayoutKind, Order, same_as},
    pack::{PackKind, Packer, Plan, Shape},
    time_fmt,
};

/// One field of a [`BitLayout`].
///
/// # Example
///
/// ```
/// use idmint_core::{BitField, FieldRole};
///
/// let worker = BitField::new("worker", 12, 5, FieldRole::Node);
/// assert_eq!(worker.max(), 31);
/// assert_eq!(worker.mask(), 0b11111 << 12);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BitField {
    name: Cow<'static, str>,
    shift: u32,
    width: u32,
    min: u64,
    /// The smallest value a generator takes (icicle's clients refuse shard 0).
    generator_min: u64,
    role: FieldRole,
}

impl BitField {
    /// A field of `width` bits whose lowest bit is bit `shift` of the ID. Values start at 0.
    pub const fn new(name: &'static str, shift: u32, width: u32, role: FieldRole) -> Self {
        BitField { name: Cow::Borrowed(name), shift, width, min: 0, generator_min: 0, role }
    }

    /// The same field, with a smallest allowed value other than 0.
    pub const fn with_min(mut self, min: u64) -> Self {
        self.min = min;
        self
    }

    /// The same node field, with a smallest value for generators other than 0.
    pub(crate) const fn with_generator_min(mut self, min: u64) -> Self {
        self.generator_min = min;
        self
    }

    /// How many values a generator can take in this field.
    fn generator_span(&self) -> u64 {
        (self.max() - self.generator_min).saturating_add(1)
    }

    /// The field's name, as used by `encode`, `decode` and JSON.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bit position of the field's lowest bit.
    pub const fn shift(&self) -> u32 {
        self.shift
    }

    /// The field's width in bits.
    pub const fn width(&self) -> u32 {
        self.width
    }

    /// What the field holds.
    pub const fn role(&self) -> FieldRole {
        self.role
    }

    /// The smallest value the field accepts.
    pub const fn min(&self) -> u64 {
        self.min
    }

    /// The largest value the field accepts: `2^width − 1`.
    pub const fn max(&self) -> u64 {
        low_mask(self.width)
    }

    /// The field's bits within the ID.
    pub const fn mask(&self) -> u64 {
        low_mask(self.width) << self.shift
    }

    /// Reads the field out of a raw ID.
    pub const fn get(&self, raw: u64) -> u64 {
        (raw >> self.shift) & low_mask(self.width)
    }

    /// Checks that `value` fits the field.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] when `value` is below [`min`](Self::min) or above
    /// [`max`](Self::max).
    pub fn check(&self, value: u64) -> Result<u64, Error> {
        if value < self.min || value > self.max() {
            return Err(Error::out_of_range(&self.name, value, self.min, self.max()));
        }
        Ok(value)
    }
}

/// A layout made of bit fields, most significant first, in a 63-bit or 64-bit integer.
///
/// A 63-bit layout keeps bit 63 zero, so its IDs are positive `i64` values, the domain of
/// elfo's book, "ID generation" (1..=2^63−1). The built-in layouts are associated constants of their ID types
/// (for example [`Snowflake::LAYOUT`](crate::Snowflake::LAYOUT)); custom layouts come from a
/// [`LayoutConfig`] through `TryFrom`.
///
/// # Example
///
/// ```
/// use idmint_core::{BitLayout, Snowflake};
///
/// let layout: &BitLayout = &Snowflake::LAYOUT;
/// let raw = layout.pack(&[1, 2, 3, 4])?;
/// assert_eq!(layout.unpack(raw), vec![1, 2, 3, 4]);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BitLayout {
    name: Cow<'static, str>,
    bits: u32,
    fields: Cow<'static, [BitField]>,
    epoch_ms: u64,
    tick_ms: u64,
    time_wraps: bool,
    /// The original program prints the ID as unpadded hex (Go's `%x`), which `parse` also
    /// reads beside the padded form.
    unpadded_hex: bool,
    /// The original counts whole ticks of the clock and of the start time (Sonyflake's
    /// `floor(now / unit) − floor(start / unit)`): another epoch is rounded down to a tick.
    floors_epoch: bool,
}

impl BitLayout {
    /// Builds a layout from trusted parts; used for the built-in constants.
    pub(crate) const fn builtin(
        name: &'static str,
        bits: u32,
        fields: &'static [BitField],
        epoch_ms: u64,
        tick_ms: u64,
        time_wraps: bool,
    ) -> Self {
        BitLayout {
            name: Cow::Borrowed(name),
            bits,
            fields: Cow::Borrowed(fields),
            epoch_ms,
            tick_ms,
            time_wraps,
            unpadded_hex: false,
            floors_epoch: false,
        }
    }

    /// A built-in layout whose fields are made at run time (a layout parameter such as
    /// TraceId's counter width).
    pub(crate) fn builtin_owned(
        name: &'static str,
        bits: u32,
        fields: Vec<BitField>,
        epoch_ms: u64,
        tick_ms: u64,
        time_wraps: bool,
    ) -> Self {
        BitLayout {
            fields: Cow::Owned(fields),
            ..Self::builtin(name, bits, &[], epoch_ms, tick_ms, time_wraps)
        }
    }

    /// The same built-in layout, whose original rounds its start time down to a tick.
    pub(crate) const fn with_floored_epoch(mut self) -> Self {
        self.floors_epoch = true;
        self
    }

    /// The same built-in layout, whose original prints unpadded hex (go-flakeid's `%x`).
    pub(crate) const fn with_unpadded_hex(mut self) -> Self {
        self.unpadded_hex = true;
        self
    }

    /// The layout's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many low bits the layout uses: 64, 63 (bit 63 is always zero), or 53 for `js53`.
    pub const fn bits(&self) -> u32 {
        self.bits
    }

    /// The fields, most significant first.
    pub fn fields(&self) -> &[BitField] {
        &self.fields
    }

    /// The Unix time, in milliseconds, of tick 0.
    pub const fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    /// The length of one tick of the time field, in milliseconds.
    pub const fn tick_ms(&self) -> u64 {
        self.tick_ms
    }

    /// Whether the time field wraps around (TraceId) instead of running out.
    pub const fn time_wraps(&self) -> bool {
        self.time_wraps
    }

    /// The same layout with another epoch. Sonyflake rounds it down to its 10 ms unit, as
    /// the original does with its start time (for decoding and for generating alike).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] if the layout has no time field.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Flake, Sonyflake};
    ///
    /// let layout = Flake::LAYOUT.with_epoch(946_684_800_000)?;
    /// assert_eq!(layout.epoch_ms(), 946_684_800_000);
    /// assert_eq!(Sonyflake::LAYOUT.with_epoch(1_409_529_600_007)?.epoch_ms(), 1_409_529_600_000);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn with_epoch(&self, epoch_ms: u64) -> Result<Self, Error> {
        if self.field_with_role(FieldRole::Time).is_none() {
            return Err(Error::InvalidLayout(format!("layout `{}` has no time field", self.name)));
        }
        let epoch_ms = match self.floors_epoch {
            true => epoch_ms - epoch_ms % self.tick_ms.max(1),
            false => epoch_ms,
        };
        Ok(BitLayout { epoch_ms, ..self.clone() })
    }

    /// The first field with the given role.
    pub fn field_with_role(&self, role: FieldRole) -> Option<&BitField> {
        self.fields.iter().find(|f| f.role == role)
    }

    /// The field with the given name.
    pub fn field(&self, name: &str) -> Option<&BitField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Packs field values, given in field order, into a raw ID.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for the first value that does not fit its field, and
    /// [`Error::InvalidLayout`] if the number of values is not the number of fields.
    pub fn pack(&self, values: &[u64]) -> Result<u64, Error> {
        if values.len() != self.fields.len() {
            return Err(Error::InvalidLayout(format!(
                "layout `{}` has {} fields, {} values were given",
                self.name,
                self.fields.len(),
                values.len()
            )));
        }
        let mut raw = 0;
        for (field, &value) in self.fields.iter().zip(values) {
            raw |= field.check(value)? << field.shift;
        }
        Ok(raw)
    }

    /// Reads every field of a raw ID, in field order. Bits outside the fields are ignored.
    pub fn unpack(&self, raw: u64) -> Vec<u64> {
        self.fields.iter().map(|f| f.get(raw)).collect()
    }

    /// Checks that `raw` is a value this layout can produce: no bits above its width (bit 63
    /// clear in a 63-bit layout), not 0 in a layout narrower than 64 bits (whose IDs are
    /// 1..=2^63−1), and every field within its range.
    ///
    /// # Errors
    ///
    /// [`Error::HighestBitSet`], [`Error::InvalidId`] or [`Error::FieldOutOfRange`].
    #[inline]
    pub fn validate(&self, raw: u64) -> Result<u64, Error> {
        // A field's value read from the ID is never above its maximum (`2^width − 1`), so
        // only its minimum can refuse it. Inlined, this folds for a constant layout (a typed
        // ID's `from_raw`) into a few comparisons; a refusal is worked out out of line.
        let narrow = self.bits < 64;
        if (narrow && (raw >> self.bits != 0 || raw == 0))
            || self.fields.iter().any(|field| field.get(raw) < field.min)
        {
            return self.validate_slowly(raw);
        }
        Ok(raw)
    }

    /// Every check of [`validate`](Self::validate), one by one, each with its own error: the
    /// path of a refusal (the test `validate_answers_as_its_slow_path` compares the two).
    #[cold]
    #[inline(never)]
    fn validate_slowly(&self, raw: u64) -> Result<u64, Error> {
        if self.bits == 63 && raw >> 63 != 0 {
            return Err(Error::HighestBitSet);
        }
        if self.bits < 64 && raw >> self.bits != 0 {
            return Err(Error::InvalidId {
                layout: self.name.to_string(),
                reason: "the value has bits set above the layout's width",
            });
        }
        if self.bits < 64 && raw == 0 {
            return Err(Error::InvalidId {
                layout: self.name.to_string(),
                reason: "0 is not an id; ids start at 1",
            });
        }
        for field in self.fields.iter() {
            field.check(field.get(raw))?;
        }
        Ok(raw)
    }

    /// The Unix time in milliseconds at which a time-field value begins, if the layout has time.
    pub fn time_of_tick(&self, tick: u64) -> Option<u64> {
        self.field_with_role(FieldRole::Time)?;
        tick.checked_mul(self.tick_ms)?.checked_add(self.epoch_ms)
    }

    /// Packs named node-field values (datacenter, worker, ...) into the generator's fixed bits.
    /// Node fields that are not named are 0.
    pub(crate) fn node_bits(&self, node: &[(&str, u64)]) -> Result<u64, Error> {
        let mut bits = 0;
        for &(name, value) in node {
            let field =
                self.field(name).filter(|f| f.role == FieldRole::Node).ok_or_else(|| {
                    Error::UnknownField {
                        layout: self.name.to_string(),
                        field: name.to_owned(),
                        expected: self
                            .fields
                            .iter()
                            .filter(|f| f.role == FieldRole::Node)
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", "),
                    }
                })?;
            bits |= field.check(value)? << field.shift;
        }
        Ok(bits)
    }

    /// How a generator fills this layout: time and sequence fields, node fields fixed.
    pub(crate) fn plan(&self, node_bits: u64) -> Result<Plan, Error> {
        let (Some(time), Some(seq)) =
            (self.field_with_role(FieldRole::Time), self.field_with_role(FieldRole::Sequence))
        else {
            return Err(Error::InvalidLayout(format!(
                "layout `{}` needs a time field and a sequence field to be generated",
                self.name
            )));
        };
        if self.fields.iter().any(|f| f.role == FieldRole::Other) {
            return Err(Error::InvalidLayout(format!(
                "layout `{}` has fields a plain generator cannot fill; use its own generator",
                self.name
            )));
        }
        let shape = self.shape_of(time, seq);
        Ok(Plan {
            epoch_ms: shape.epoch_ms,
            tick_ms: shape.tick_ms,
            time_bits: time.width,
            time_wraps: self.time_wraps,
            seq_limit: shape.seq_limit,
            packer: Packer { kind: shape.kind, node_bits, seq_bits: shape.seq_bits },
        })
    }

    /// The [`Shape`] of a generator of this layout, at compile time: the typed IDs of the
    /// built-in bit layouts declare theirs with it, so that their generators run on constants.
    /// It is [`plan`](Self::plan)'s shape, made by the same function.
    ///
    /// # Panics
    ///
    /// At compile time, for a layout without a time field and a sequence field.
    pub(crate) const fn compiled_shape(self) -> Shape {
        let shape = self.shape_of_fields();
        // A constant cannot run a destructor, and a built-in layout owns nothing.
        std::mem::forget(self);
        shape
    }

    /// [`compiled_shape`](Self::compiled_shape)'s work, on a borrowed layout.
    const fn shape_of_fields(&self) -> Shape {
        let fields: &[BitField] = match &self.fields {
            Cow::Borrowed(fields) => fields,
            Cow::Owned(fields) => fields.as_slice(),
        };
        let (mut time, mut seq) = (None, None);
        let mut i = 0;
        while i < fields.len() {
            match fields[i].role {
                // The first of each, as `field_with_role` finds them.
                FieldRole::Time if time.is_none() => time = Some(&fields[i]),
                FieldRole::Sequence if seq.is_none() => seq = Some(&fields[i]),
                _ => {}
            }
            i += 1;
        }
        match (time, seq) {
            (Some(time), Some(seq)) => self.shape_of(time, seq),
            _ => panic!("a compiled shape needs a time field and a sequence field"),
        }
    }

    /// The shape a generator of this layout runs on, from its time and sequence fields.
    ///
    /// The generator's state is a pair `tick << seq_bits | seq`. Where the sequence is the
    /// lowest field and the time does not wrap (Snowflake, icicle, js53), `seq_bits` is the
    /// time field's shift rather than the sequence's width: the pair is then the ID without
    /// its node bits, and packing it is an OR. The sequence still counts up to
    /// `seq_limit` only, so the bits between stay 0 for the node; and `tick` still reaches
    /// the time field's end, as `time.shift + time.width <= 64`.
    const fn shape_of(&self, time: &BitField, seq: &BitField) -> Shape {
        let in_place = seq.shift == 0 && !self.time_wraps && time.shift >= seq.width;
        Shape {
            epoch_ms: self.epoch_ms,
            tick_ms: self.tick_ms,
            seq_bits: if in_place { time.shift } else { seq.width },
            seq_limit: 1 << seq.width,
            kind: PackKind::Bits {
                time_shift: time.shift,
                // A time that does not wrap needs no mask: the generator never goes past the
                // field's last tick (`max_tick`), so a tick always fits it.
                time_mask: if self.time_wraps { time.max() } else { u64::MAX },
                seq_shift: seq.shift,
            },
        }
    }

    /// What the layout can hold: its lifetime and its rate.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Snowflake;
    ///
    /// let cap = Snowflake::LAYOUT.capacity();
    /// assert_eq!(cap.ids_per_tick, 4096);
    /// assert_eq!(cap.generators, 1024);
    /// assert!(cap.end.unwrap().starts_with("2080-"));
    /// ```
    pub fn capacity(&self) -> Capacity {
        let time = self.field_with_role(FieldRole::Time);
        let ids_per_tick = self
            .field_with_role(FieldRole::Sequence)
            .map_or(1, |f| f.max().saturating_sub(f.min).saturating_add(1));
        let generators =
            self.fields.iter().filter(|f| f.role == FieldRole::Node).fold(1u64, |acc, f| {
                acc.saturating_mul(1u64.checked_shl(f.width).unwrap_or(u64::MAX))
            });
        let end_ms = time.and_then(|f| {
            let ticks = 1u64.checked_shl(f.width)?;
            ticks.checked_mul(self.tick_ms)?.checked_add(self.epoch_ms)
        });
        Capacity {
            tick_ms: self.tick_ms,
            start_ms: time.map(|_| self.epoch_ms),
            end_ms: if self.time_wraps { None } else { end_ms },
            wrap_ms: if self.time_wraps { end_ms.map(|e| e - self.epoch_ms) } else { None },
            start: time.map(|_| time_fmt::format_rfc3339_ms(self.epoch_ms)),
            end: if self.time_wraps { None } else { end_ms.map(time_fmt::format_rfc3339_ms) },
            ids_per_tick,
            ids_per_second_per_generator: ids_per_tick.saturating_mul(1000) / self.tick_ms.max(1),
            generators,
        }
    }
}

/// Every plain bit layout (Snowflake, Sonyflake, icicle, go-flakeid, js53 and custom ones) is a
/// layout kind of its own.
impl LayoutKind for BitLayout {
    fn name(&self) -> &str {
        &self.name
    }

    fn epoch_ms(&self) -> Option<u64> {
        Some(self.epoch_ms)
    }

    fn parse_upstream(&self, text: &str, format: Format) -> Option<Result<AnyId, Error>> {
        (self.unpadded_hex && format == Format::Hex)
            .then(|| crate::format::parse_unpadded_hex(text, 64).map(|v| AnyId::U64(v as u64)))
    }

    fn with_epoch(&self, epoch_ms: u64) -> Option<Result<Arc<dyn LayoutKind>, Error>> {
        Some(BitLayout::with_epoch(self, epoch_ms).map(|b| Arc::new(b) as Arc<dyn LayoutKind>))
    }

    fn is_js_safe(&self) -> bool {
        self.bits <= 53
    }

    fn fields(&self) -> Vec<FieldInfo> {
        self.field_infos()
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        Some(self.diagram())
    }

    fn capacity(&self) -> Capacity {
        BitLayout::capacity(self)
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let numbers = self.read_fields(values)?;
        Ok(AnyId::U64(self.validate(self.pack(&numbers)?)?))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let raw = self.validate(id.u64_for(&self.name)?)?;
        Ok(self.fields.iter().map(|f| num(f.name(), f.get(raw))).collect())
    }

    fn time_ms(&self, id: AnyId, _now_ms: u64) -> Result<Option<u64>, Error> {
        let raw = id.u64_for(&self.name)?;
        Ok(self.field_with_role(FieldRole::Time).and_then(|f| self.time_of_tick(f.get(raw))))
    }

    fn fingerprint(&self) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|f| format!("{}:{}:{:?}", f.name(), f.width(), f.role()).to_lowercase())
            .collect();
        format!(
            "{}/{}b/epoch={}/tick={}/{}",
            self.name,
            self.bits,
            self.epoch_ms,
            self.tick_ms,
            fields.join(",")
        )
    }

    fn generator_count(&self) -> u64 {
        self.node_fields().fold(1u64, |acc, f| acc.saturating_mul(f.generator_span()))
    }

    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)> {
        self.split_id(generator_id).into_iter().map(|(f, value)| num(f.name(), value)).collect()
    }

    fn generator_for(
        &self,
        generator_id: Option<u64>,
        mut values: FieldReader,
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let from_id = generator_id.map(|id| self.split_id(id));
        let mut named = Vec::new();
        for (i, f) in self.node_fields().enumerate() {
            let given = from_id.as_ref().map(|ids| ids[i].1);
            let value = values.node(f.name(), given, f.generator_min)?;
            if value < f.generator_min {
                return Err(Error::out_of_range(f.name(), value, f.generator_min, f.max()));
            }
            named.push((f.name(), value));
        }
        Ok(AnyGenerator::from_u64(Generator::custom(self, &named, config)?))
    }

    fn order(&self) -> Order {
        let roles: Vec<FieldRole> =
            self.fields.iter().map(|f| f.role).filter(|r| *r != FieldRole::Node).collect();
        match (roles.as_slice(), self.time_wraps) {
            ([FieldRole::Time, FieldRole::Sequence], false) => Order::Increasing,
            ([FieldRole::Time, FieldRole::Sequence], true) => Order::Periodic,
            (_, true) => Order::KSorted,
            _ => Order::Unordered,
        }
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Clock
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

impl BitLayout {
    fn node_fields(&self) -> impl Iterator<Item = &BitField> {
        self.fields.iter().filter(|f| f.role == FieldRole::Node)
    }

    /// The node-field values of a generator ID, most significant first: the fields read as
    /// one number in mixed radix (each field's span), from each field's generator minimum.
    fn split_id(&self, mut generator_id: u64) -> Vec<(&BitField, u64)> {
        let mut out: Vec<(&BitField, u64)> = self
            .node_fields()
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|f| {
                let span = f.generator_span();
                let value = f.generator_min + generator_id % span;
                generator_id /= span;
                (f, value)
            })
            .collect();
        out.reverse();
        out
    }

    /// The fields as `explain` shows them.
    pub(crate) fn field_infos(&self) -> Vec<FieldInfo> {
        self.fields
            .iter()
            .map(|f| FieldInfo::number(f.name(), f.width(), f.min(), f.max(), f.role()))
            .collect()
    }

    /// Every field's value from `values`, in field order.
    pub(crate) fn read_fields(&self, values: &mut FieldReader) -> Result<Vec<u64>, Error> {
        self.fields.iter().map(|f| values.number(f.name())).collect()
    }

    /// The bit diagram, with the always-zero top bits first.
    pub(crate) fn diagram(&self) -> Vec<Segment> {
        let mut out = Vec::new();
        if self.bits < 64 {
            out.push(Segment::new("0", 63, self.bits));
        }
        for f in self.fields.iter() {
            out.push(Segment::new(f.name(), f.shift() + f.width() - 1, f.shift()));
        }
        out
    }
}

/// A custom layout, as written in a TOML layout file: plain data, validated by `TryFrom`.
///
/// ```toml
/// name = "orders"
/// bits = 63                        # 63 keeps the sign bit zero; 64 uses it
/// epoch = "2024-01-01T00:00:00Z"   # or epoch_ms = 1704067200000
/// tick_ms = 1
///
/// [[fields]]                       # most significant first
/// name = "timestamp"
/// bits = 41
/// role = "time"
///
/// [[fields]]
/// name = "worker"
/// bits = 10                        # role defaults to "node"
///
/// [[fields]]
/// name = "sequence"
/// bits = 12
/// role = "sequence"
/// ```
///
/// # Example
///
/// ```
/// use idmint_core::{BitLayout, FieldConfig, FieldRole, LayoutConfig};
///
/// let config = LayoutConfig {
///     name: "orders".into(),
///     bits: 63,
///     epoch: Some("2024-01-01T00:00:00Z".into()),
///     epoch_ms: None,
///     tick_ms: 1,
///     fields: vec![
///         FieldConfig { name: "timestamp".into(), bits: 41, role: FieldRole::Time },
///         FieldConfig { name: "worker".into(), bits: 10, role: FieldRole::Node },
///         FieldConfig { name: "sequence".into(), bits: 12, role: FieldRole::Sequence },
///     ],
/// };
/// let layout = BitLayout::try_from(config)?;
/// assert_eq!(layout.epoch_ms(), 1_704_067_200_000);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct LayoutConfig {
    /// The layout's name.
    pub name: String,
    /// 63 (bit 63 reserved, always zero) or 64.
    pub bits: u32,
    /// The epoch as RFC 3339 text. Give this or `epoch_ms`, not both.
    #[cfg_attr(feature = "serde", serde(default))]
    pub epoch: Option<String>,
    /// The epoch in Unix milliseconds. Give this or `epoch`, not both.
    #[cfg_attr(feature = "serde", serde(default))]
    pub epoch_ms: Option<u64>,
    /// The length of one tick of the time field, in milliseconds (at least 1).
    #[cfg_attr(feature = "serde", serde(default = "one"))]
    pub tick_ms: u64,
    /// The fields, most significant first. Their widths must add up to `bits`.
    pub fields: Vec<FieldConfig>,
}

#[cfg(feature = "serde")]
fn one() -> u64 {
    1
}

/// One field of a [`LayoutConfig`].
///
/// # Example
///
/// ```
/// use idmint_core::{FieldConfig, FieldRole};
///
/// let field = FieldConfig { name: "worker".into(), bits: 10, role: FieldRole::Node };
/// assert_eq!(field.bits, 10);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct FieldConfig {
    /// The field's name: lower-case letters, digits and `_`.
    pub name: String,
    /// The field's width in bits (1..=63).
    pub bits: u32,
    /// What the field holds; `node` if not given.
    #[cfg_attr(feature = "serde", serde(default = "node_role"))]
    pub role: FieldRole,
}

#[cfg(feature = "serde")]
fn node_role() -> FieldRole {
    FieldRole::Node
}

impl TryFrom<LayoutConfig> for BitLayout {
    type Error = Error;

    fn try_from(config: LayoutConfig) -> Result<Self, Error> {
        let bad = |msg: String| Err(Error::InvalidLayout(msg));
        let name = config.name.trim();
        if name.is_empty() || name.len() > 64 || !name.chars().all(is_name_char) {
            return bad(format!(
                "layout name `{}` must be 1 to 64 characters of a-z, 0-9, `-` or `_`",
                config.name
            ));
        }
        if config.bits != 63 && config.bits != 64 {
            return bad(format!("bits must be 63 or 64, not {}", config.bits));
        }
        if config.tick_ms == 0 {
            return bad("tick_ms must be at least 1".into());
        }
        let epoch_ms = match (&config.epoch, config.epoch_ms) {
            (Some(_), Some(_)) => return bad("give `epoch` or `epoch_ms`, not both".into()),
            (Some(text), None) => time_fmt::parse_rfc3339_ms(text)
                .map_err(|reason| Error::InvalidLayout(format!("epoch `{text}`: {reason}")))?,
            (None, Some(ms)) => ms,
            (None, None) => return bad("an epoch is required (`epoch` or `epoch_ms`)".into()),
        };
        // Summed as u64: arbitrary u32 widths must not overflow.
        let total: u64 = config.fields.iter().map(|f| u64::from(f.bits)).sum();
        if total != u64::from(config.bits) {
            return bad(format!("field widths add up to {total} bits, expected {}", config.bits));
        }
        let mut fields = Vec::with_capacity(config.fields.len());
        let mut shift = config.bits;
        for field in &config.fields {
            if field.name.is_empty()
                || field.name.len() > 32
                || !field.name.chars().all(is_name_char)
            {
                return bad(format!(
                    "field name `{}` must be 1 to 32 characters of a-z, 0-9, `-` or `_`",
                    field.name
                ));
            }
            if fields.iter().any(|f: &BitField| f.name == field.name) {
                return bad(format!("field `{}` appears twice", field.name));
            }
            if field.bits == 0 || field.bits > 63 {
                return bad(format!("field `{}` must be 1 to 63 bits wide", field.name));
            }
            shift -= field.bits;
            fields.push(BitField {
                name: Cow::Owned(field.name.clone()),
                shift,
                width: field.bits,
                min: 0,
                generator_min: 0,
                role: field.role,
            });
        }
        let count = |role| fields.iter().filter(|f| f.role == role).count();
        if count(FieldRole::Time) != 1 || count(FieldRole::Sequence) != 1 {
            return bad("a layout needs exactly one `time` field and one `sequence` field".into());
        }
        if count(FieldRole::Other) != 0 {
            return bad("custom layouts take only `time`, `sequence` and `node` fields".into());
        }
        let time = fields.iter().position(|f| f.role == FieldRole::Time);
        let seq = fields.iter().position(|f| f.role == FieldRole::Sequence);
        if time > seq {
            return bad("the time field must be more significant than the sequence field, \
                        or IDs would not increase with time"
                .into());
        }
        let time_width = fields[time.unwrap_or(0)].width;
        let seq_width = fields[seq.unwrap_or(0)].width;
        // The generator keeps (tick, sequence) in one 64-bit word.
        if time_width + seq_width > 63 {
            return bad("time and sequence fields together must be at most 63 bits".into());
        }
        // A time field whose range runs past 64-bit Unix milliseconds is accepted (Sonyflake v2
        // allows 61 bits of 10 ms): the clock never gets there, every step of the generator
        // saturates, `capacity` has no end, and an ID whose time cannot be written in Unix ms has
        // no Unix time (`time_ms` gives `None`), as under an epoch near the end of 64 bits.
        Ok(BitLayout {
            name: Cow::Owned(name.to_owned()),
            bits: config.bits,
            fields: Cow::Owned(fields),
            epoch_ms,
            tick_ms: config.tick_ms,
            time_wraps: false,
            unpadded_hex: false,
            floors_epoch: false,
        })
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layouts `validate` is compared on: every built-in one, and two with fields whose
    /// smallest value is not 0 (one 63-bit, one 64-bit).
    fn layouts_to_validate() -> Vec<BitLayout> {
        static WITH_MINS_63: [BitField; 3] = [
            BitField::new("time", 22, 41, FieldRole::Time).with_min(5),
            BitField::new("node", 12, 10, FieldRole::Node).with_min(1),
            BitField::new("sequence", 0, 12, FieldRole::Sequence),
        ];
        static WITH_MINS_64: [BitField; 2] = [
            BitField::new("time", 16, 48, FieldRole::Time),
            BitField::new("sequence", 0, 16, FieldRole::Sequence).with_min(3),
        ];
        vec![
            crate::Snowflake::LAYOUT,
            crate::Sonyflake::LAYOUT,
            crate::Icicle::LAYOUT,
            crate::Js53::LAYOUT,
            crate::TraceId::LAYOUT,
            crate::Flake::LAYOUT,
            crate::SonyflakeV2::LAYOUT,
            BitLayout::builtin("mins-63", 63, &WITH_MINS_63, 0, 1, false),
            BitLayout::builtin("mins-64", 64, &WITH_MINS_64, 0, 1, false),
        ]
    }

    use proptest::prelude::{Strategy, any};

    proptest::proptest! {
        /// `validate`'s quick check accepts exactly what its slow path accepts, and a refusal
        /// is the slow path's error; raw values are drawn near each layout's edges too (0, a
        /// field at its minimum, bit 63).
        #[test]
        fn validate_answers_as_its_slow_path(
            raw in proptest::prop_oneof![
                any::<u64>(),
                0u64..4_096,
                any::<u64>().prop_map(|r| r >> 1),
                any::<u64>().prop_map(|r| r & !0xf_ffff),
            ]
        ) {
            for layout in layouts_to_validate() {
                proptest::prop_assert_eq!(
                    layout.validate(raw),
                    layout.validate_slowly(raw),
                    "layout {}, raw {:#x}", layout.name(), raw
                );
            }
        }
    }

    fn config(fields: &[(&str, u32, FieldRole)]) -> LayoutConfig {
        LayoutConfig {
            name: "t".into(),
            bits: fields.iter().map(|f| f.1).sum(),
            epoch: None,
            epoch_ms: Some(0),
            tick_ms: 1,
            fields: fields
                .iter()
                .map(|&(name, bits, role)| FieldConfig { name: name.into(), bits, role })
                .collect(),
        }
    }

    /// Each case: fields, and the expected error message fragment (empty means valid).
    #[test]
    fn custom_layout_validation() {
        use FieldRole::*;
        let check = |fields: &[(&str, u32, FieldRole)], want: &str| {
            let got = BitLayout::try_from(config(fields));
            match (got, want) {
                (Ok(_), "") => {}
                (Err(e), w) if !w.is_empty() => {
                    assert!(e.to_string().contains(w), "{e} does not contain {w}")
                }
                (got, want) => panic!("{fields:?}: got {got:?}, want {want:?}"),
            }
        };
        check(&[("timestamp", 41, Time), ("worker", 10, Node), ("sequence", 12, Sequence)], "");
        check(&[("timestamp", 42, Time), ("worker", 10, Node), ("sequence", 12, Sequence)], "");
        check(
            &[("timestamp", 40, Time), ("worker", 10, Node), ("sequence", 12, Sequence)],
            "63 or 64",
        );
        check(&[("sequence", 12, Sequence), ("timestamp", 51, Time)], "more significant");
        check(&[("timestamp", 51, Time), ("timestamp", 12, Sequence)], "twice");
        check(&[("timestamp", 63, Time)], "exactly one");
        check(
            &[("timestamp", 30, Time), ("Worker", 21, Node), ("sequence", 12, Sequence)],
            "field name",
        );
        check(&[("timestamp", 0, Time), ("w", 51, Node), ("sequence", 12, Sequence)], "1 to 63");
    }

    #[test]
    fn pack_refuses_out_of_range_values() {
        let layout = BitLayout::try_from(config(&[
            ("timestamp", 41, FieldRole::Time),
            ("worker", 10, FieldRole::Node),
            ("sequence", 12, FieldRole::Sequence),
        ]))
        .unwrap();
        assert_eq!(layout.pack(&[1, 1023, 4095]).unwrap(), 1 << 22 | 1023 << 12 | 4095);
        let err = layout.pack(&[1, 1024, 0]).unwrap_err();
        assert_eq!(err.to_string(), "field `worker` out of range: 1024 is not in 0..=1023");
    }
}
