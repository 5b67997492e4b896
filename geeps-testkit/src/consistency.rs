//! The consistency property shared by the in-process and the network tests:
//! a random case (workers, clocks, slack, per-clock deltas, delays, keyed or
//! recorded calls, budget) and one worker's run of it, which checks the lower
//! bound on every read and the exact sums at the end.

use std::sync::Arc;
use std::time::Duration;

use geeps_core::{keys, Config, Slack, Transport};
use proptest::prelude::*;

use crate::Backend;

const ROWS: u32 = 3;
const WIDTH: usize = 2;

#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub workers: usize,
    pub clocks: usize,
    pub slack: Slack,
    /// `deltas[w][c][row]`: small integers, so float sums are exact.
    pub deltas: Vec<Vec<Vec<u8>>>,
    /// `delay_us[w][c]`: sleeps that shuffle the interleaving.
    pub delay_us: Vec<Vec<u16>>,
    /// `keyed[w][c]`: use the slow path (keys) instead of the recorded handles.
    pub keyed: Vec<Vec<bool>>,
    /// Budget in bytes: small budgets keep rows on the host side.
    pub budget: usize,
}

pub fn case() -> impl Strategy<Value = Case> {
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

/// Runs worker `rank` of `case` over `transport` on the device named by
/// `GEEPS_TEST_DEVICE` (see [`Backend::from_env`]; the host device by
/// default): the form a process started by a launcher runs.
pub fn run_rank(case: &Case, rank: usize, transport: Arc<dyn Transport>) -> Result<(), String> {
    run_rank_on(Backend::from_env(), case, rank, transport)
}

/// Runs worker `rank` of `case` over `transport` on a fresh device of
/// `backend` (its capacity the case's budget); an error string says what broke.
pub fn run_rank_on(backend: Backend, case: &Case, rank: usize, transport: Arc<dyn Transport>) -> Result<(), String> {
    let (mut b, fx) = backend.builder(
        Config::default()
            .with_row_width(WIDTH)
            .with_device_memory(case.budget)
            .with_wait_deadline(Duration::from_secs(20)),
    );
    let w = b.parameter_table("w", ROWS);
    b.transport(transport);
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
        let read = if keyed { ps.read_keys(&k, case.slack) } else { ps.read(r) }.map_err(|e| e.to_string())?;
        let seen = fx.get(&read);
        for row in 0..ROWS as usize {
            let floor = match case.slack.required_age(c as u64) {
                Some(age) => sum(case, None, 0..age as usize, row) + sum(case, Some(rank), age as usize..c, row),
                None => sum(case, Some(rank), 0..c, row),
            };
            let ceiling = sum(case, None, 0..case.clocks, row);
            for v in &seen[row * WIDTH..(row + 1) * WIDTH] {
                if *v < floor || *v > ceiling {
                    return Err(format!("rank {rank} clock {c} row {row}: saw {v}, must be in [{floor}, {ceiling}]"));
                }
            }
        }
        let up = if keyed { ps.pre_update_keys(&k) } else { ps.pre_update(u) }.map_err(|e| e.to_string())?;
        let zeroed = fx.get(&up);
        if zeroed.iter().any(|v| *v != 0.0) {
            return Err(format!("rank {rank} clock {c}: update buffer not zeroed: {zeroed:?}"));
        }
        let deltas: Vec<f32> = (0..ROWS as usize * WIDTH).map(|i| f32::from(case.deltas[rank][c][i / WIDTH])).collect();
        fx.set(&up, &deltas);
        up.update().map_err(|e| e.to_string())?;
        read.post().map_err(|e| e.to_string())?;
        ps.table_clock(w).map_err(|e| e.to_string())?;
    }
    // Everyone has ended every clock: a BSP read sees exactly the total.
    let total = ps.read_keys(&k, Slack::BSP).map_err(|e| e.to_string())?;
    let seen = fx.get(&total);
    for row in 0..ROWS as usize {
        let want = sum(case, None, 0..case.clocks, row);
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
}

impl Case {
    /// A one-line text form, to hand a case to another process.
    pub fn encode(&self) -> String {
        let slack = match self.slack {
            Slack::Bounded(s) => s.to_string(),
            Slack::Unbounded => "u".into(),
        };
        let flat = |v: Vec<String>| v.join(",");
        let deltas = flat(self.deltas.iter().flatten().flatten().map(|d| d.to_string()).collect());
        let delays = flat(self.delay_us.iter().flatten().map(|d| d.to_string()).collect());
        let keyed = flat(self.keyed.iter().flatten().map(|k| u8::from(*k).to_string()).collect());
        format!("{};{};{slack};{};{deltas};{delays};{keyed}", self.workers, self.clocks, self.budget)
    }

    pub fn decode(text: &str) -> Result<Case, String> {
        let parts: Vec<&str> = text.split(';').collect();
        if parts.len() != 7 {
            return Err(format!("bad case `{text}`"));
        }
        let num = |s: &str| s.parse::<usize>().map_err(|e| format!("`{s}`: {e}"));
        let list =
            |s: &str| -> Result<Vec<usize>, String> { s.split(',').filter(|x| !x.is_empty()).map(num).collect() };
        let (workers, clocks, budget) = (num(parts[0])?, num(parts[1])?, num(parts[3])?);
        let slack = if parts[2] == "u" { Slack::Unbounded } else { Slack::Bounded(num(parts[2])? as u32) };
        let (d, t, k) = (list(parts[4])?, list(parts[5])?, list(parts[6])?);
        if d.len() != workers * clocks * ROWS as usize || t.len() != workers * clocks || k.len() != workers * clocks {
            return Err(format!("case `{text}` has the wrong number of values"));
        }
        let deltas = (0..workers)
            .map(|w| {
                (0..clocks)
                    .map(|c| (0..ROWS as usize).map(|r| d[(w * clocks + c) * ROWS as usize + r] as u8).collect())
                    .collect()
            })
            .collect();
        let delay_us = (0..workers).map(|w| (0..clocks).map(|c| t[w * clocks + c] as u16).collect()).collect();
        let keyed = (0..workers).map(|w| (0..clocks).map(|c| k[w * clocks + c] == 1).collect()).collect();
        Ok(Case { workers, clocks, slack, deltas, delay_us, keyed, budget })
    }
}
