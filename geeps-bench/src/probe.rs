//! Asks the planner, without training, what a workload needs: the
//! placement at a budget, the smallest budget it accepts, and the smallest
//! budget at which everything lives on the device ("everything fits"). Each
//! question builds a single-worker instance, records the trainer's virtual
//! iteration and reads `Geeps::plan()`. It never runs an iteration.

use geeps::{Config, Error, Geeps};

use crate::error::{BenchError, Result};
use crate::train_job::PlanSummary;
use crate::trainer::{self, Mode, Trainer};
use crate::workload::{Workload, ROW_WIDTH};

/// The plan at `budget`, or the planner's refusal.
pub fn plan(w: &Workload, mode: Mode, slack: Option<u32>, budget: usize) -> Result<Result<PlanSummary, Error>> {
    let mut b = Geeps::builder(Config::default().with_row_width(ROW_WIDTH).with_device_memory(budget));
    let tables = trainer::prepare(&mut b, w, mode);
    let ps = b.build()?;
    let planned = Trainer::start(&ps, w, tables, trainer::slack_of(slack)).and_then(|_| ps.plan());
    ps.shutdown()?;
    match planned {
        Ok(p) => Ok(Ok(PlanSummary::from(&p))),
        Err(e @ Error::BudgetTooSmall { .. }) => Ok(Err(e)),
        Err(e) => Err(e.into()),
    }
}

/// The smallest budget the planner accepts (one peak, nothing pinned).
pub fn minimum(w: &Workload, mode: Mode, slack: Option<u32>) -> Result<usize> {
    match plan(w, mode, slack, ROW_WIDTH * 4)? {
        Ok(_) => Ok(ROW_WIDTH * 4),
        Err(Error::BudgetTooSmall { needed, .. }) => {
            // Confirm the planner accepts what it asked for.
            plan(w, mode, slack, needed)?.map_err(|e| BenchError::msg(format!("planner refused {needed} B: {e}")))?;
            Ok(needed)
        }
        Err(e) => Err(e.into()),
    }
}

fn all_on_device(p: &PlanSummary) -> bool {
    p.param_host_bytes == 0 && p.local_host_bytes == 0 && p.double_buffered
}

/// The smallest budget (to 0.5%) at which parameters and local data all stay
/// on the device with a double-buffered pool.
pub fn everything_fits(w: &Workload, mode: Mode, slack: Option<u32>) -> Result<usize> {
    let data = w.param_bytes() + w.local_bytes();
    let mut hi = data + 4 * w.largest_param_bytes() + 4 * (ROW_WIDTH * 4);
    while !plan(w, mode, slack, hi)?.is_ok_and(|p| all_on_device(&p)) {
        hi *= 2;
    }
    let mut lo = data;
    while hi - lo > hi / 200 {
        let mid = lo + (hi - lo) / 2;
        if plan(w, mode, slack, mid)?.is_ok_and(|p| all_on_device(&p)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}
