//! Server configuration (the `[server]` table of `idmint serve --config`): parsing and
//! validating never panics.
#![no_main]

use idmint_server::ServerConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(config) = toml::from_str::<ServerConfig>(text) else { return };
    let _ = idmint_server::fuzzing::validate_config(config);
});
