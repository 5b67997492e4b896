//! A partition's update accumulator is recycled across clocks without being
//! zeroed: a clock whose first update covers every row overwrites it, any
//! other first update starts from zeros. Whatever the mix of whole and
//! partial updates, every read must see exactly the sum of the updates.

use std::time::Duration;

use geeps::{keys, Config, Geeps, InProcessCluster, Slack};

const ROWS: u32 = 8;
const WIDTH: usize = 4;

#[test]
fn whole_and_partial_updates_over_recycled_accumulators_sum_exactly() {
    let workers = 2;
    let cluster = InProcessCluster::new(workers).unwrap();
    let threads: Vec<_> = (0..workers)
        .map(|rank| {
            let transport = cluster.transport(rank).unwrap();
            std::thread::spawn(move || {
                let config = Config::default()
                    .with_row_width(WIDTH)
                    .with_device_memory(1 << 20)
                    .with_wait_deadline(Duration::from_secs(20));
                let mut b = Geeps::builder(config);
                let t = b.parameter_table("w", ROWS);
                b.transport(transport);
                let ps = b.build().unwrap();
                ps.finish_virtual_iteration().unwrap();
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
                ps.shutdown().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
