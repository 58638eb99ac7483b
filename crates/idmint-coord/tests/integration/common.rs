//! What the segment tests (`tests/integration/segments.rs`) and the segment benchmark
//! (`benches/segments.rs`) share.

use idmint_coord::SegmentOptions;

/// Options with a fixed step: no adaptation, so gap bounds are exact.
pub(crate) fn fixed(step: u64) -> SegmentOptions {
    SegmentOptions {
        initial_step: step,
        min_step: step,
        max_step: step,
        ..SegmentOptions::default()
    }
}
