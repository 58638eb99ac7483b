//! Layout files (TOML, as `--layout-file` reads them): parsing and validating never panics,
//! and a valid layout answers its capacity and formats IDs.
#![no_main]

use idmint_core::{AnyId, BitLayout, Format, Layout, LayoutConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(config) = toml::from_str::<LayoutConfig>(text) else { return };
    let Ok(bits) = BitLayout::try_from(config) else { return };
    let layout = Layout::custom(bits);
    let _ = layout.capacity();
    let _ = layout.generator_count();
    let _ = layout.with_epoch(0);
    for raw in [1_u64, u64::from(u32::MAX), u64::MAX >> 1, u64::MAX] {
        if let Ok(text) = layout.format(AnyId::U64(raw), Format::Decimal) {
            let _ = layout.parse(&text, Format::Decimal);
        }
        let _ = layout.decode(AnyId::U64(raw));
    }
});
