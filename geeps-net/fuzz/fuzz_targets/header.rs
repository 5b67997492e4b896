//! The prost frame header: decode, re-encode round trip, the constant-time token check.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| geeps_net::fuzzing::header(data));
