//! Property tests of the consistency rules: random interleavings of W workers
//! with random per-clock deltas, under BSP, SSP and async, by recorded handle
//! and by keys. Checks the lower bound (a read at clock c with slack s sees
//! every update of clocks < c − s, and the worker's own updates) and the sums
//! at the end (nothing lost, nothing applied twice).

use std::sync::Arc;
use std::time::Duration;

use geeps::{keys, Config, Geeps, InProcessCluster, Slack, Transport};
use proptest::prelude::*;

const ROWS: u32 = 3;
const WIDTH: usize = 2;

#[derive(Debug, Clone)]
struct Case {
    workers: usize,
    clocks: usize,
    slack: Slack,
    /// deltas[w][c][row]: small integers, so float sums are exact.
    deltas: Vec<Vec<Vec<u8>>>,
    /// delay_us[w][c]: sleeps that shuffle the interleaving.
    delay_us: Vec<Vec<u16>>,
    /// keyed[w][c]: use the slow path (keys) instead of the recorded handles.
    keyed: Vec<Vec<bool>>,
    /// Budget in bytes: small budgets keep rows on the host side.
    budget: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        2usize..=4,
        1usize..=6,
        prop_oneof![Just(Slack::BSP), Just(Slack::Bounded(1)), Just(Slack::Bounded(2)), Just(Slack::Unbounded)],
        prop_oneof![Just(1usize << 20), Just(2 * ROWS as usize * WIDTH * 4)],
    )
        .prop_flat_map(|(workers, clocks, slack, budget)| {
            (
                proptest::collection::vec(
                    proptest::collection::vec(proptest::collection::vec(0u8..4, ROWS as usize), clocks),
                    workers,
                ),
                proptest::collection::vec(proptest::collection::vec(0u16..400, clocks), workers),
                proptest::collection::vec(proptest::collection::vec(proptest::bool::weighted(0.2), clocks), workers),
            )
                .prop_map(move |(deltas, delay_us, keyed)| Case {
                    workers,
                    clocks,
                    slack,
                    deltas,
                    delay_us,
                    keyed,
                    budget,
                })
        })
}

fn sum(case: &Case, worker: Option<usize>, clocks: std::ops::Range<usize>, row: usize) -> f32 {
    (0..case.workers)
        .filter(|w| worker.is_none_or(|x| x == *w))
        .map(|w| clocks.clone().map(|c| f32::from(case.deltas[w][c][row])).sum::<f32>())
        .sum()
}

/// Runs one case; returns an error string instead of panicking in threads.
fn run_case(case: &Case, transports: Vec<Arc<dyn Transport>>) -> Result<(), String> {
    let case = Arc::new(case.clone());
    let threads: Vec<_> = transports
        .into_iter()
        .enumerate()
        .map(|(rank, t)| {
            let case = case.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let mut b = Geeps::builder(Config {
                    row_width: WIDTH,
                    device_memory: case.budget,
                    wait_deadline: Duration::from_secs(20),
                    ..Config::default()
                });
                let w = b.parameter_table("w", ROWS);
                b.transport(t);
                let ps = b.build().map_err(|e| e.to_string())?;
                let k = keys(w, 0..ROWS);
                let r = ps.virtual_read(&k, case.slack).map_err(|e| e.to_string())?;
                let u = ps.virtual_pre_update(&k).map_err(|e| e.to_string())?;
                ps.virtual_update(u).map_err(|e| e.to_string())?;
                ps.virtual_post_read(r).map_err(|e| e.to_string())?;
                ps.virtual_table_clock(w).map_err(|e| e.to_string())?;
                ps.finish_virtual_iteration().map_err(|e| e.to_string())?;
                for c in 0..case.clocks {
                    std::thread::sleep(Duration::from_micros(u64::from(case.delay_us[rank][c])));
                    let keyed = case.keyed[rank][c];
                    let read =
                        if keyed { ps.read_keys(&k, case.slack) } else { ps.read(r) }.map_err(|e| e.to_string())?;
                    let seen = read.as_slice().map_err(|e| e.to_string())?.to_vec();
                    for row in 0..ROWS as usize {
                        let floor = match case.slack.required_age(c as u64) {
                            Some(age) => {
                                sum(&case, None, 0..age as usize, row) + sum(&case, Some(rank), age as usize..c, row)
                            }
                            None => sum(&case, Some(rank), 0..c, row),
                        };
                        let ceiling = sum(&case, None, 0..case.clocks, row);
                        for v in &seen[row * WIDTH..(row + 1) * WIDTH] {
                            if *v < floor || *v > ceiling {
                                return Err(format!(
                                    "rank {rank} clock {c} row {row}: saw {v}, must be in [{floor}, {ceiling}]"
                                ));
                            }
                        }
                    }
                    let mut up =
                        if keyed { ps.pre_update_keys(&k) } else { ps.pre_update(u) }.map_err(|e| e.to_string())?;
                    let s = up.as_mut_slice().map_err(|e| e.to_string())?;
                    for row in 0..ROWS as usize {
                        s[row * WIDTH..(row + 1) * WIDTH].fill(f32::from(case.deltas[rank][c][row]));
                    }
                    up.update().map_err(|e| e.to_string())?;
                    read.post().map_err(|e| e.to_string())?;
                    ps.table_clock(w).map_err(|e| e.to_string())?;
                }
                // Everyone has ended every clock: a BSP read sees exactly the total.
                let total = ps.read_keys(&k, Slack::BSP).map_err(|e| e.to_string())?;
                let seen = total.as_slice().map_err(|e| e.to_string())?;
                for row in 0..ROWS as usize {
                    let want = sum(&case, None, 0..case.clocks, row);
                    if seen[row * WIDTH..(row + 1) * WIDTH].iter().any(|v| *v != want) {
                        return Err(format!(
                            "rank {rank}: final row {row} is {:?}, expected {want}",
                            &seen[row * WIDTH..(row + 1) * WIDTH]
                        ));
                    }
                }
                drop(total);
                // Stay until every worker has read its final total: a worker
                // that leaves early stops holding back the data age.
                ps.table_clock(w).map_err(|e| e.to_string())?;
                ps.read_keys(&k, Slack::BSP).map_err(|e| e.to_string())?.post().map_err(|e| e.to_string())?;
                ps.shutdown().map_err(|e| e.to_string())
            })
        })
        .collect();
    let mut first_err = None;
    for t in threads {
        let r = t.join().unwrap_or_else(|_| Err("worker thread panicked".into()));
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn reads_respect_slack_and_sums_are_exact(case in case()) {
        let cluster = InProcessCluster::new(case.workers).unwrap();
        let transports = (0..case.workers).map(|r| cluster.transport(r).unwrap()).collect();
        let result = run_case(&case, transports);
        prop_assert!(result.is_ok(), "{:?}", result);
    }
}
