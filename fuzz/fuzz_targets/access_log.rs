//! An access log, read and replayed as simulate does: a combined log, or
//! JSON lines when the input starts with `{`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = if data.first() == Some(&b'{') {
        tollgate_server::fuzzing::json_log(data)
    } else {
        tollgate_server::fuzzing::combined_log(data)
    };
});
