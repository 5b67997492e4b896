//! A partition's update accumulator is recycled across clocks without being
//! zeroed: a clock whose first update covers every row overwrites it, any
//! other first update starts from zeros. Whatever the mix of whole and
//! partial updates, every read must see exactly the sum of the updates.
//! On the host device a pre-update covering whole partitions is itself
//! taken as the outgoing deltas; its buffer's room in the pool is given
//! back at `update` or discard, however many clocks its deltas stay in
//! flight.

use std::time::Duration;

use geeps::{keys, Config, Geeps, InProcessCluster, Slack, TableId};

const ROWS: u32 = 8;
const WIDTH: usize = 4;
const WORKERS: usize = 2;

/// Runs `body(rank, instance, table)` on each of two workers of a table of
/// `rows` rows of `width`, with `budget` bytes of device memory.
fn each_worker(rows: u32, width: usize, budget: usize, body: fn(usize, &Geeps, TableId)) {
    let cluster = InProcessCluster::new(WORKERS).unwrap();
    let threads: Vec<_> = (0..WORKERS)
        .map(|rank| {
            let transport = cluster.transport(rank).unwrap();
            std::thread::spawn(move || {
                let config = Config::default()
                    .with_row_width(width)
                    .with_device_memory(budget)
                    .with_wait_deadline(Duration::from_secs(20));
                let mut b = Geeps::builder(config);
                let t = b.parameter_table("w", rows);
                b.transport(transport);
                let ps = b.build().unwrap();
                ps.finish_virtual_iteration().unwrap();
                body(rank, &ps, t);
                ps.shutdown().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn whole_and_partial_updates_over_recycled_accumulators_sum_exactly() {
    each_worker(ROWS, WIDTH, 1 << 20, |rank, ps, t| {
        let workers = WORKERS;
        let mut want = vec![0f32; ROWS as usize * WIDTH];
        for clock in 0..24u32 {
            // The whole table every fourth clock; otherwise a third
            // of the rows, a different third each clock, so a
            // recycled accumulator's old deltas sit in rows the
            // update does not touch.
            let rows: Vec<u32> = (0..ROWS).filter(|r| clock % 4 == 0 || (r + clock) % 3 == 0).collect();
            let k: Vec<_> = rows.iter().flat_map(|&r| keys(t, r..r + 1)).collect();
            let delta = (clock + 1) as f32;
            let mut u = ps.pre_update_keys(&k).unwrap();
            u.as_mut_slice().unwrap().fill(delta);
            u.update().unwrap();
            for &r in &rows {
                for x in &mut want[r as usize * WIDTH..(r as usize + 1) * WIDTH] {
                    *x += delta * workers as f32;
                }
            }
            ps.table_clock(t).unwrap();
            let read = ps.read_keys(&keys(t, 0..ROWS), Slack::BSP).unwrap();
            assert_eq!(read.as_slice().unwrap(), &want[..], "rank {rank} after clock {clock}");
            read.post().unwrap();
        }
    });
}

#[test]
fn whole_table_update_buffers_give_their_room_back() {
    // 256 KiB of parameters in 1 MiB: the pool holds about three table-sized
    // buffers, so a reservation kept past its update or discard would stop
    // the loop (the wait deadline fails the pre-update) within a few clocks.
    const BIG_ROWS: u32 = 1024;
    const BIG_WIDTH: usize = 64;
    each_worker(BIG_ROWS, BIG_WIDTH, 1 << 20, |rank, ps, t| {
        let all = keys(t, 0..BIG_ROWS);
        let mut want = 0f32;
        for clock in 0..30u32 {
            let discarded = ps.pre_update_keys(&all).unwrap();
            discarded.discard().unwrap();
            let mut u = ps.pre_update_keys(&all).unwrap();
            assert!(u.as_slice().unwrap().iter().all(|&x| x == 0.0), "rank {rank}: a pre-update comes zeroed");
            let delta = (clock % 5 + 1) as f32;
            u.as_mut_slice().unwrap().fill(delta);
            u.update().unwrap();
            want += delta * WORKERS as f32;
            ps.table_clock(t).unwrap();
            let read = ps.read_keys(&all, Slack::BSP).unwrap();
            assert!(read.as_slice().unwrap().iter().all(|&x| x == want), "rank {rank} after clock {clock}");
            read.post().unwrap();
        }
    });
}
