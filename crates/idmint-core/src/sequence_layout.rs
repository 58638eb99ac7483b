//! The `sequence` layout: plain integers 1..=2^63−1 handed out by a segment store (a database
//! or a local file), with no clock and no generator of its own.

use crate::{
    any::{AnyGenerator, AnyId},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    generator::GeneratorConfig,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, clockless_capacity, same_as},
};

/// The layout's name.
const NAME: &str = "sequence";

/// The largest `sequence` ID: `2^63 − 1`, so that every ID fits a signed 64-bit column.
const MAX: u64 = i64::MAX as u64;

/// The `sequence` layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SequenceLayout;

impl LayoutKind for SequenceLayout {
    fn name(&self) -> &str {
        NAME
    }

    fn epoch_ms(&self) -> Option<u64> {
        None
    }

    fn fields(&self) -> Vec<FieldInfo> {
        vec![FieldInfo::number("value", 63, 1, MAX, FieldRole::Sequence)]
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        Some(vec![Segment::new("0", 63, 63), Segment::new("value", 62, 0)])
    }

    fn capacity(&self) -> Capacity {
        // One sequence per namespace, shared by every server that takes ranges of it.
        clockless_capacity(MAX, 1)
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let value = values.number("value")?;
        if !(1..=MAX).contains(&value) {
            return Err(Error::out_of_range("value", value, 1, MAX));
        }
        Ok(AnyId::U64(value))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let raw = id.u64_for(NAME)?;
        if !(1..=MAX).contains(&raw) {
            return Err(Error::InvalidId {
                layout: NAME.to_owned(),
                reason: "a sequence id is a whole number from 1 to 2^63-1",
            });
        }
        Ok(vec![num("value", raw)])
    }

    fn time_ms(&self, _id: AnyId, _now_ms: u64) -> Result<Option<u64>, Error> {
        Ok(None)
    }

    fn fingerprint(&self) -> String {
        "sequence/63b/1..=2^63-1".to_owned()
    }

    fn generator_count(&self) -> u64 {
        1
    }

    /// Nothing: the one "generator" is the segment store.
    fn identity(&self, _generator_id: u64) -> Vec<(String, FieldValue)> {
        Vec::new()
    }

    fn generator_for(
        &self,
        _generator_id: Option<u64>,
        _values: FieldReader,
        _config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        Err(Error::InvalidLayout(
            "layout `sequence` has no generator: its ids come from a segment store \
             (a database or a local file); serve them with `idmint serve --layout sequence`"
                .to_owned(),
        ))
    }

    fn order(&self) -> Order {
        // The server hands out one increasing run from its segments.
        Order::Increasing
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Store
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

/// The `sequence` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "sequence",
    about: "plain integers 1..=2^63-1 from a segment store (a database or a local file), no clock",
    make: || std::sync::Arc::new(SequenceLayout),
};
