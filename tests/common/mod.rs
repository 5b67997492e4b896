//! Fixtures shared by the integration tests of the facade crate. They own
//! no assertions.

/// What worker `rank` adds at `clock`, given what it read: large values of
/// both signs beside small ones, so the keepers' summation order shows in
/// the bits.
pub fn order_sensitive_delta(rank: usize, clock: u64, read: &[f32], out: &mut [f32]) {
    for (i, (o, r)) in out.iter_mut().zip(read).enumerate() {
        let big = 1e7 * (1.0 + clock as f32 * 0.1);
        *o += match (rank + i) % 3 {
            0 => big + r * 0.5,
            1 => 0.75 + rank as f32 * 0.125 + r * 1e-3,
            _ => -big - r * 0.25,
        };
    }
}
