//! Two ranks over loopback, once with the f32 wire and once with bf16 (for
//! updates, and for updates and publications both): after K clocks of the
//! same pseudo-random updates the rows agree within the error feedback's
//! bound, and the keepers received (and sent) half the bytes.

use crate::test_rendezvous::{bsp_rank, BspRun};
use crate::{NetOptions, WireEncoding};

const ROWS: u32 = 64;
const WIDTH: usize = 8;
const CLOCKS: u64 = 20;

fn rendezvous(world: usize) -> String {
    crate::test_rendezvous::loopback_rendezvous(world, "")
}

/// Rank `rank`'s delta for value `i` at `clock`: in (-1, 1), with a full
/// f32 mantissa (so bf16 rounding always leaves a residual).
fn delta(rank: usize, clock: u64, i: usize) -> f32 {
    let mut x =
        (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ clock.wrapping_mul(0xbf58_476d_1ce4_e5b9) ^ i as u64;
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 29;
    ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// Runs CLOCKS BSP clocks and returns the last read's values and the
/// payload bytes this rank's keeper received from the other rank (updates)
/// and queued for it (publications).
fn rank(
    rank: usize,
    world: usize,
    server: String,
    wire: WireEncoding,
    publish: WireEncoding,
) -> (Vec<f32>, (u64, u64)) {
    let options = NetOptions::default().with_wire(wire).with_publish_wire(publish);
    let run = BspRun { rows: ROWS, width: WIDTH, clocks: CLOCKS };
    let deltas = |clock, i| delta(rank, clock, i);
    bsp_rank(rank, world, server, options, &run, deltas, |c| {
        (c.keeper_bytes_from(1 - rank), c.keeper_bytes_to(1 - rank))
    })
}

fn run_both(wire: WireEncoding, publish: WireEncoding) -> Vec<(Vec<f32>, (u64, u64))> {
    let world = 2;
    let server = rendezvous(world);
    let threads: Vec<_> = (0..world)
        .map(|r| {
            let server = server.clone();
            std::thread::spawn(move || rank(r, world, server, wire, publish))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn run(wire: WireEncoding) -> Vec<(Vec<f32>, u64)> {
    run_both(wire, WireEncoding::F32).into_iter().map(|(rows, (bytes_in, _))| (rows, bytes_in)).collect()
}

#[test]
fn bf16_rows_match_f32_within_the_feedback_bound_on_half_the_bytes() {
    let exact = run(WireEncoding::F32);
    let halved = run(WireEncoding::Bf16);
    // Each value holds CLOCKS updates of both ranks, one rank's over the
    // wire. With error feedback the keeper trails the exact sum by the
    // sender's last residual, at most half a bf16 step of a value under 1
    // (2^-9), plus the f32 rounding of both runs' sums (under 40 in
    // magnitude, so 2^-19 per addition, 2 * CLOCKS additions a run):
    // 2^-9 + 4 * CLOCKS * 2^-19 < 2.2e-3. Without the feedback the bound
    // would be CLOCKS * 2^-9 = 0.04.
    let tolerance = 2.2e-3;
    let per_batch_f32 = (ROWS as u64 / 2) * WIDTH as u64 * 4;
    for (r, ((want, f32_bytes), (got, bf16_bytes))) in exact.iter().zip(&halved).enumerate() {
        assert_eq!(want.len(), got.len());
        let worst = want.iter().zip(got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= tolerance, "rank {r}: bf16 rows differ from f32 by up to {worst}");
        assert!(worst > 0.0, "rank {r}: bf16 rows equal f32 exactly: was the bf16 wire used?");
        // Every clock carries deltas, so exactly half the bytes.
        assert_eq!(*f32_bytes, CLOCKS * per_batch_f32, "rank {r}'s keeper, f32 wire");
        assert_eq!(*bf16_bytes * 2, *f32_bytes, "rank {r}'s keeper, bf16 wire");
    }
}

#[test]
fn bf16_both_ways_stays_within_both_feedback_bounds_on_half_the_bytes_each_way() {
    let exact = run_both(WireEncoding::F32, WireEncoding::F32);
    let halved = run_both(WireEncoding::Bf16, WireEncoding::Bf16);
    // The keeper trails the exact sum by the update residual (2^-9, as
    // above); a worker's rows trail the keeper's by the publication's
    // residual: half a bf16 step of the last clock's change, under 2 in
    // magnitude (2^-8). With the f32 rounding of the sums: under 6.2e-3.
    // Without feedback on publications the error would grow with every
    // clock's rounding of the rows themselves.
    let tolerance = 6.2e-3;
    let per_clock_f32 = (ROWS as u64 / 2) * WIDTH as u64 * 4;
    for (r, ((want, (f32_in, f32_out)), (got, (bf16_in, bf16_out)))) in exact.iter().zip(&halved).enumerate() {
        let worst = want.iter().zip(got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= tolerance, "rank {r}: bf16 both ways differs from f32 by up to {worst}");
        assert!(worst > 0.0, "rank {r}: equal to f32 exactly: was the bf16 wire used?");
        assert_eq!((*f32_in, *f32_out), (CLOCKS * per_clock_f32, CLOCKS * per_clock_f32), "rank {r}'s keeper, f32");
        assert_eq!((*bf16_in * 2, *bf16_out * 2), (*f32_in, *f32_out), "rank {r}'s keeper, bf16 both ways");
    }
    // Both ranks read the same rows: each keeper's publications reached the
    // other rank as changes, and its own worker exactly; the two copies of
    // a partition differ by at most the publication residual.
    let (a, b) = (&halved[0].0, &halved[1].0);
    let apart = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    assert!(apart <= 2f32.powi(-8) + 1e-6, "the ranks' rows differ by {apart}");
}
