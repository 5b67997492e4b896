//! Stripes over a real cluster: three ranks over loopback whose keepers
//! each own several partitions of the table (`NetOptions::stripes`) read,
//! clock after clock, the very bits a one-stripe cluster reads (f32 sums
//! of the same deltas in the same rank order), and with bf16 both ways
//! stay within the error feedback's bounds; a send window over TCP
//! changes when frames leave, never what arrives.

use crate::test_rendezvous::{bsp_rank, loopback_rendezvous, BspRun};
use crate::{NetOptions, WireEncoding};

/// Rows that do not divide evenly into 3 ranks × 4 stripes.
const RUN: BspRun = BspRun { rows: 101, width: 3, clocks: 12 };

fn delta(rank: usize, clock: u64, i: usize) -> f32 {
    ((rank * 7919 + clock as usize * 104_729 + i * 31) % 1000) as f32 / 997.0 - 0.5
}

/// Each rank's last read, and how many update batches its keeper took
/// from the other ranks (over sockets or shared memory).
fn run(options: NetOptions) -> Vec<(Vec<f32>, u64)> {
    let world = 3;
    let server = loopback_rendezvous(world, "");
    let threads: Vec<_> = (0..world)
        .map(|r| {
            let (server, options) = (server.clone(), options.clone());
            std::thread::spawn(move || {
                let batches = |c: &crate::NetCluster| c.keeper_socket_batches() + c.keeper_shm_batches();
                bsp_rank(r, world, server, options, &RUN, |c, i| delta(r, c, i), batches)
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn striped_keepers_give_the_same_bits_as_one_partition_each() {
    let one = run(NetOptions::default());
    let striped = run(NetOptions::default().with_stripes(4));
    for (r, ((a, one_batches), (b, striped_batches))) in one.iter().zip(&striped).enumerate() {
        assert_eq!(a.len(), (RUN.rows as usize) * RUN.width);
        // Two other ranks, a batch per clock and partition: 4 partitions here each clock.
        assert_eq!((*one_batches, *striped_batches), (2 * RUN.clocks, 8 * RUN.clocks), "rank {r}'s keeper");
        let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "rank {r}: 4 stripes read other bits than 1");
    }
}

#[test]
fn striped_keepers_with_bf16_both_ways_stay_within_the_feedback_bounds() {
    let exact = run(NetOptions::default());
    let bf16 =
        NetOptions::default().with_stripes(4).with_wire(WireEncoding::Bf16).with_publish_wire(WireEncoding::Bf16);
    let halved = run(bf16);
    // Deltas under 0.5 from 3 ranks: the update residual (2^-10 per rank's
    // value) plus the publication's (half a bf16 step of a change under 1.5).
    for (r, ((a, _), (b, _))) in exact.iter().zip(&halved).enumerate() {
        let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(worst > 0.0 && worst < 6e-3, "rank {r}: bf16 both ways, 4 stripes, off by {worst}");
    }
}

#[test]
fn a_send_window_over_tcp_gives_the_same_bits_as_none() {
    // Over TCP (shared memory holds no window): one stripe in flight
    // ahead of the slowest connection, against connections unrestrained.
    let tcp = NetOptions::default().with_stripes(4).with_shared_memory(false);
    let free = run(tcp.clone().with_send_window(0));
    let held = run(tcp.with_send_window(1));
    for (r, ((a, a_batches), (b, b_batches))) in free.iter().zip(&held).enumerate() {
        assert_eq!((*a_batches, *b_batches), (8 * RUN.clocks, 8 * RUN.clocks), "rank {r}'s keeper");
        let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "rank {r}: a send window of 1 read other bits than none");
    }
}
