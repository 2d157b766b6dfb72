//! A TOML config file (serve, validate, simulate).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tollgate_server::fuzzing::config_toml(data);
});
