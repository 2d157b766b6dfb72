//! A RateLimitConfig resource of an xDS push (protobuf bytes).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tollgate_server::fuzzing::xds_resource(data);
});
