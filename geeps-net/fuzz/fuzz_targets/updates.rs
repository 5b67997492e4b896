//! Update batches read from frames and applied by the keeper logic: row payloads against table sizes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| geeps_net::fuzzing::updates(data));
