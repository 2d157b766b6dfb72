//! An ERL YAML config file (ERL mode, validate --envoy-config).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tollgate_server::fuzzing::erl_yaml(data);
});
