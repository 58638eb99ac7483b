//! Bodies of `POST /v1/batch`: parsing never panics, and only JSON objects are taken.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if idmint_server::fuzzing::parse_batch_body(data).is_ok() {
        let first = data.iter().find(|b| !b.is_ascii_whitespace());
        assert_eq!(first, Some(&b'{'), "a body that is not an object was taken");
    }
});
