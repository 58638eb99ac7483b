//! elfo's TraceId (being written).

/// Packs a generated (tick, sequence) pair into a TraceId.
#[inline]
pub(crate) fn pack_generated(tick: u64, node_bits: u64, seq: u64) -> u64 {
    (tick & 0x1FF_FFFF) << 38 | node_bits | (seq / 1023) << 10 | (seq % 1023 + 1)
}
