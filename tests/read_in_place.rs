//! Where the host addresses device memory, a read of consecutive rows is
//! handed the published rows themselves: within one partition its kept
//! publication, across partitions the table-wide buffer the publications
//! landed in side by side. What a reader holds must never change under it,
//! however many clocks pass, and every read must see what a gathered copy
//! would.

use std::time::Duration;

use geeps::{keys, Config, Geeps, InProcessCluster, Slack, TableId};

const ROWS: u32 = 64;
const WIDTH: usize = 4;
const WORKERS: usize = 2;
const CLOCKS: u32 = 12;

/// Runs `body(rank, instance, table)` on each of two workers (two
/// partitions) after recording a whole-table BSP read, update and clock.
fn each_worker(body: fn(usize, &Geeps, TableId, geeps::Handle, geeps::Handle)) {
    let cluster = InProcessCluster::new(WORKERS).unwrap();
    let threads: Vec<_> = (0..WORKERS)
        .map(|rank| {
            let transport = cluster.transport(rank).unwrap();
            std::thread::spawn(move || {
                let config = Config::default().with_row_width(WIDTH).with_wait_deadline(Duration::from_secs(20));
                let mut b = Geeps::builder(config);
                let t = b.parameter_table("w", ROWS);
                b.transport(transport);
                let ps = b.build().unwrap();
                let k = keys(t, 0..ROWS);
                let r = ps.virtual_read(&k, Slack::BSP).unwrap();
                let u = ps.virtual_pre_update(&k).unwrap();
                ps.virtual_update(u).unwrap();
                ps.virtual_post_read(r).unwrap();
                ps.virtual_table_clock(t).unwrap();
                ps.finish_virtual_iteration().unwrap();
                body(rank, &ps, t, r, u);
                ps.shutdown().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// One recorded clock: rank `rank` adds `rank + 1` to every value.
fn clock(ps: &Geeps, rank: usize, t: TableId, r: geeps::Handle, u: geeps::Handle, c: u32) -> Vec<f32> {
    let read = ps.read(r).unwrap();
    let values = read.as_slice().unwrap().to_vec();
    // BSP: every update of the clocks before `c`; a faster rank's update of
    // clock `c` may be in too.
    let floor = (c * 3) as f32;
    assert!(values.iter().all(|v| *v >= floor && *v <= floor + 3.0), "rank {rank} clock {c}: {:?}", &values[..4]);
    let mut up = ps.pre_update(u).unwrap();
    up.as_mut_slice().unwrap().fill((rank + 1) as f32);
    up.update().unwrap();
    read.post().unwrap();
    ps.table_clock(t).unwrap();
    values
}

#[test]
fn reads_across_partitions_are_served_in_place_and_never_change_under_the_reader() {
    each_worker(|rank, ps, t, r, u| {
        let mut c = 0;
        while c < 4 {
            clock(ps, rank, t, r, u, c);
            c += 1;
        }
        // Held over several clocks: the buffer it was served from is not
        // reused while it is held, and later reads are still right.
        let held = ps.read_keys(&keys(t, 0..ROWS), Slack::BSP).unwrap();
        let seen = held.as_slice().unwrap().to_vec();
        while c < CLOCKS {
            clock(ps, rank, t, r, u, c);
            assert_eq!(held.as_slice().unwrap(), &seen[..], "rank {rank}: a held read changed at clock {c}");
            c += 1;
        }
        drop(held);
        // Every recorded read but perhaps the first (nothing published yet:
        // gathered from the cache), and the held one, are served in place.
        let stats = ps.stats();
        assert!(stats.reads_in_place >= u64::from(CLOCKS), "rank {rank}: {stats}");
        // After everyone's last clock, a BSP read sees exactly the total.
        let total = ps.read_keys(&keys(t, 0..ROWS), Slack::BSP).unwrap();
        assert!(total.as_slice().unwrap().iter().all(|v| *v == (CLOCKS * 3) as f32), "rank {rank}");
    });
}

#[test]
fn reads_within_a_partition_and_reads_with_gaps_see_the_same_rows() {
    each_worker(|rank, ps, t, r, u| {
        for c in 0..CLOCKS {
            clock(ps, rank, t, r, u, c);
            // Rows 2..10 lie in partition 0: a view of its publication.
            let inside = ps.read_keys(&keys(t, 2..10), Slack::BSP).unwrap();
            let inside_values = inside.as_slice().unwrap().to_vec();
            drop(inside);
            // Every other row of both partitions: gathered.
            let spread: Vec<_> = (0..ROWS).step_by(2).flat_map(|row| keys(t, row..row + 1)).collect();
            let gathered = ps.read_keys(&spread, Slack::BSP).unwrap();
            let gathered_values = gathered.as_slice().unwrap().to_vec();
            drop(gathered);
            // All that was published for clock c + 1 once every rank ended clock c.
            let want = ((c + 1) * 3) as f32;
            assert!(inside_values.iter().chain(&gathered_values).all(|v| *v == want), "rank {rank} clock {c}");
        }
        // In place: every read inside partition 0 and the recorded reads
        // (the first one too if a publication came before it); never a
        // read with gaps.
        let served = ps.stats().reads_in_place;
        let clocks = u64::from(CLOCKS);
        assert!((2 * clocks - 1..=2 * clocks).contains(&served), "rank {rank}: {served} reads in place");
    });
}
