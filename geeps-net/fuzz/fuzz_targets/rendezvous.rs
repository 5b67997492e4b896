//! The rendezvous over loopback TCP: registrations to the server, and the client reading its answer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| geeps_net::fuzzing::rendezvous(data));
