//! The frame reader (length prefix, header and payload limits) on a stream of frames arriving in chunks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| geeps_net::fuzzing::frames(data));
