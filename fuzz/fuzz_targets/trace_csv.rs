//! A CSV trace, read and replayed as simulate does.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tollgate_server::fuzzing::trace_csv(data);
});
