//! A keeper service over loopback TCP: up to four connections of arbitrary bytes (hello, updates, leave).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| geeps_net::fuzzing::keeper(data));
