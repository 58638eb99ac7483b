//! ID text in every format, for every built-in layout: parsing never panics, and what parses
//! is written back to text that parses to the same ID.
#![no_main]

use idmint_core::{Format, Layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, text)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let format = Format::ALL[usize::from(selector) % Format::ALL.len()];
    let builtins = Layout::builtins();
    let (name, _) = builtins[usize::from(selector / 16) % builtins.len()];
    let layout = Layout::builtin(name).expect("a built-in layout");
    let _ = format.parse_u64(text);
    let _ = format.parse_u128(text);
    let _ = text.parse::<Format>();
    if let Ok(id) = layout.parse(text, format) {
        let _ = layout.decode(id);
        let _ = layout.time_ms(id, u64::MAX);
        for out in Format::ALL {
            if let Ok(written) = layout.format(id, out) {
                let again = layout.parse(&written, out);
                assert_eq!(again.ok(), Some(id), "{name}: {id:?} as {out} is {written:?}");
            }
        }
    }
});
