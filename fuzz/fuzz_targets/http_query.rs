//! Query strings of the HTTP API's ID routes: parsing never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else { return };
    let _ = idmint_server::fuzzing::parse_query(query);
});
