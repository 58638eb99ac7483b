//! How a (tick, sequence) pair becomes an ID: the packings a generator knows, described by
//! shifts and masks only. Each layout chooses one in its [`Plan`]; the generator never names a
//! layout.

/// A mask of the low `width` bits (`width` may be 64).
pub(crate) const fn low_mask(width: u32) -> u64 {
    if width >= 64 { u64::MAX } else { (1u64 << width) - 1 }
}

/// How a (tick, sequence) pair becomes an ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PackKind {
    /// `(tick & time_mask) << time_shift | node | seq << seq_shift`.
    Bits { time_shift: u32, time_mask: u64, seq_shift: u32 },
    /// `(tick & time_mask) << time_shift | node | (seq / per_chunk) << chunk_shift |
    /// (seq % per_chunk + 1)`: the sequence split into a chunk number and a counter that is
    /// never 0 (elfo's TraceId).
    Chunked { time_shift: u32, time_mask: u64, chunk_shift: u32, per_chunk: u64 },
    /// `tick.reverse_bits() | node | seq << seq_shift`: the tick's 64 bits reversed, so that
    /// consecutive ticks scatter (LableOrg's SPREAD mode).
    Reversed { seq_shift: u32 },
}

/// Everything needed to turn pairs into IDs; `Copy`, so batches carry their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packer {
    pub(crate) kind: PackKind,
    /// The generator's fixed bits (node fields, flags).
    pub(crate) node_bits: u64,
    pub(crate) seq_bits: u32,
}

impl Packer {
    /// How much a packed ID grows when the sequence grows by one within a tick, or 0 when
    /// that is not a constant.
    pub(crate) fn step(&self) -> u64 {
        self.kind.step()
    }

    #[inline]
    pub(crate) fn pack(&self, pair: u64) -> u64 {
        self.kind.pack(self.seq_bits, self.node_bits, pair)
    }
}

impl PackKind {
    /// How much a packed ID grows when the sequence grows by one within a tick, or 0 when
    /// that is not a constant.
    #[inline(always)]
    pub(crate) fn step(self) -> u64 {
        match self {
            PackKind::Bits { seq_shift, .. } | PackKind::Reversed { seq_shift } => 1 << seq_shift,
            PackKind::Chunked { .. } => 0,
        }
    }

    /// Packs `pair` (`tick << seq_bits | seq`) with the node's fixed bits. Always inlined, so
    /// that where the kind and `seq_bits` are constants (a [`Shape`] known at compile time) the
    /// match and the shifts fold away.
    #[inline(always)]
    pub(crate) fn pack(self, seq_bits: u32, node_bits: u64, pair: u64) -> u64 {
        let tick = pair >> seq_bits;
        let seq = pair & ((1 << seq_bits) - 1);
        match self {
            PackKind::Bits { time_shift, time_mask, seq_shift } => {
                (tick & time_mask) << time_shift | node_bits | seq << seq_shift
            }
            PackKind::Chunked { time_shift, time_mask, chunk_shift, per_chunk } => {
                (tick & time_mask) << time_shift
                    | node_bits
                    | (seq / per_chunk) << chunk_shift
                    | (seq % per_chunk + 1)
            }
            PackKind::Reversed { seq_shift } => tick.reverse_bits() | seq << seq_shift | node_bits,
        }
    }
}

/// What the hot path of a generator needs, apart from its node and its state: the clock's
/// epoch and tick, the sequence, and how to pack. A typed ID of a built-in layout knows its
/// shape at compile time (`Sealed::SHAPE`), so its generator runs on constants; every other
/// generator reads the same values from its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub(crate) epoch_ms: u64,
    pub(crate) tick_ms: u64,
    pub(crate) seq_bits: u32,
    pub(crate) seq_limit: u64,
    pub(crate) kind: PackKind,
}

/// What a layout tells the generator: its time field, its sequence and how to pack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) epoch_ms: u64,
    pub(crate) tick_ms: u64,
    pub(crate) time_bits: u32,
    pub(crate) time_wraps: bool,
    pub(crate) seq_limit: u64,
    pub(crate) packer: Packer,
}

impl Plan {
    /// The plan's [`Shape`].
    pub(crate) fn shape(&self) -> Shape {
        Shape {
            epoch_ms: self.epoch_ms,
            tick_ms: self.tick_ms,
            seq_bits: self.packer.seq_bits,
            seq_limit: self.seq_limit,
            kind: self.packer.kind,
        }
    }
}
