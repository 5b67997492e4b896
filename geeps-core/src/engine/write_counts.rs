//! Per-table write counters that order acquisitions after earlier writes.
//!
//! Every write (an update, or a saving `post_local_access`) is counted twice
//! in application order: in `all`, and in `moved` when the reclaimer moves
//! data for it. A save of a buffer served in place moves nothing: the
//! application wrote the pinned rows themselves. An acquisition served in
//! place needs only the earlier writes that move data into those rows; every
//! other acquisition copies from the store and needs all earlier writes, in
//! place ones included (the application may still be writing them). So an
//! in-place access never waits behind the reclaimer's unrelated work, such as
//! a large update queued before an in-place save.
//!
//! This file only counts; it never waits and never touches data.

use crate::engine::index::AccessPlan;

/// Writes per table: issued (application, allocator's prediction) or applied
/// (reclaimer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WriteCounts {
    all: Vec<u64>,
    moved: Vec<u64>,
}

impl WriteCounts {
    pub(crate) fn new(tables: usize) -> Self {
        WriteCounts { all: vec![0; tables], moved: vec![0; tables] }
    }

    /// Counts a write through `plan`: an update, or a saving post of a local access.
    pub(crate) fn count(&mut self, plan: &AccessPlan) {
        let moves_data = plan.in_place.is_none();
        for &t in &plan.tables {
            self.all[t] += 1;
            if moves_data {
                self.moved[t] += 1;
            }
        }
    }

    /// The counter an acquisition through `plan` orders itself after.
    pub(crate) fn relevant(&self, table: usize, in_place: bool) -> u64 {
        if in_place {
            self.moved[table]
        } else {
            self.all[table]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DevicePtr;

    fn plan(tables: Vec<usize>, in_place: bool) -> AccessPlan {
        AccessPlan {
            rows: 1,
            tables,
            groups: Vec::new(),
            in_place: in_place.then_some(DevicePtr(64)),
            outgoing: Default::default(),
            run: None,
        }
    }

    #[test]
    fn in_place_saves_count_only_for_copying_readers() {
        let mut w = WriteCounts::new(2);
        w.count(&plan(vec![0], true));
        assert_eq!((w.relevant(0, true), w.relevant(0, false)), (0, 1));
        w.count(&plan(vec![0, 1], false));
        assert_eq!((w.relevant(0, true), w.relevant(0, false)), (1, 2));
        assert_eq!((w.relevant(1, true), w.relevant(1, false)), (1, 1));
    }
}
