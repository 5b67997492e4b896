//! How a net lives in geeps, as GeePS-Caffe lays it out: each parameter
//! layer's blobs flattened into rows of its own parameter table (or of a
//! table shared by `layers_per_table` consecutive layers), and every blob's
//! data, every gradient, every layer's backward state and every solver
//! history (as many copies of the layer's parameters as the solver keeps)
//! in local tables of their own. It owns table declaration and row
//! keys; it must never make a geeps call other than declaring tables.

use geeps::{keys, GeepsBuilder, RowKey, TableId};

use crate::net::params::ParamLayout;
use crate::net::Net;

/// What a run of rows in an access buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    Data(usize),
    Diff(usize),
    Aux(usize),
    History(usize),
}

#[derive(Debug, Clone)]
pub struct PsLayout {
    pub row_width: usize,
    /// One parameter table per group of `layers_per_table` parameter layers.
    pub param_tables: Vec<TableId>,
    /// Per parameter layer (in `ParamLayout` order): its rows.
    pub param_keys: Vec<Vec<RowKey>>,
    /// Per parameter table: the parameter layer updated last in backward
    /// (the lowest in the net), after which the table is clocked.
    pub clock_after: Vec<usize>,
    pub data: Vec<TableId>,
    pub diff: Vec<Option<TableId>>,
    pub aux: Vec<Option<TableId>>,
    pub history: Vec<TableId>,
    /// Copies of its parameter vector each layer's history table holds.
    pub history_copies: usize,
    /// The sums of the test outputs across workers: `test_outputs` sums
    /// (the most any test net has), then the count of test batches.
    pub test_table: TableId,
    pub test_outputs: usize,
    /// Two floats per worker: where the workers agree to snapshot or stop
    /// (`control.rs`).
    pub control_table: TableId,
}

/// Rows holding `floats` values.
pub fn rows_for(floats: usize, width: usize) -> u32 {
    floats.div_ceil(width).max(1) as u32
}

/// The sizes a layout is declared with.
#[derive(Debug, Clone, Copy)]
pub struct LayoutSizes {
    /// Consecutive parameter layers sharing one table.
    pub per_table: usize,
    /// Floats per row.
    pub width: usize,
    /// Copies of each parameter layer's vector in its history table.
    pub history_copies: usize,
    /// Workers of the cluster (a control slot each).
    pub world: usize,
    /// Outputs of the widest test net (or of the train net).
    pub test_outputs: usize,
}

impl PsLayout {
    /// Declares the tables of `net` on `b`.
    pub fn declare(b: &mut GeepsBuilder, net: &Net, params: &ParamLayout, sizes: LayoutSizes) -> PsLayout {
        let LayoutSizes { per_table, width, history_copies, world, test_outputs } = sizes;
        let mut param_tables = Vec::new();
        let mut param_keys = Vec::new();
        let mut clock_after = Vec::new();
        for (g, group) in params.layers.chunks(per_table).enumerate() {
            let rows: Vec<u32> = group.iter().map(|lp| rows_for(lp.len, width)).collect();
            let name = if group.len() == 1 {
                format!("params/{}", group[0].name)
            } else {
                format!("params/{}..{}", group[0].name, group[group.len() - 1].name)
            };
            let t = b.parameter_table(&name, rows.iter().sum());
            let mut first = 0;
            for r in rows {
                param_keys.push(keys(t, first..first + r));
                first += r;
            }
            param_tables.push(t);
            clock_after.push(g * per_table);
        }
        let data = net
            .blobs
            .iter()
            .map(|bl| b.local_table(&format!("data/{}", bl.name), rows_for(bl.count(), width)))
            .collect();
        let diff = net
            .blobs
            .iter()
            .map(|bl| bl.needs_diff.then(|| b.local_table(&format!("diff/{}", bl.name), rows_for(bl.count(), width))))
            .collect();
        let aux = net
            .layers
            .iter()
            .map(|l| (l.aux_len > 0).then(|| b.local_table(&format!("state/{}", l.name), rows_for(l.aux_len, width))))
            .collect();
        let history = params
            .layers
            .iter()
            .map(|lp| b.local_table(&format!("history/{}", lp.name), rows_for(history_copies * lp.len, width)))
            .collect();
        let test_table = b.parameter_table("test-outputs", rows_for(test_outputs + 1, width));
        let control_table = b.parameter_table("control", rows_for(2 * world, width));
        PsLayout {
            row_width: width,
            param_tables,
            param_keys,
            clock_after,
            data,
            diff,
            aux,
            history,
            history_copies,
            test_table,
            test_outputs,
            control_table,
        }
    }

    /// The table and rows of a slot.
    pub fn slot_keys(&self, net: &Net, params: &ParamLayout, slot: Slot) -> Vec<RowKey> {
        let w = self.row_width;
        let (t, floats) = match slot {
            Slot::Data(b) => (self.data[b], net.blobs[b].count()),
            Slot::Diff(b) => (self.diff[b].expect("gradient table of a blob that needs one"), net.blobs[b].count()),
            Slot::Aux(l) => (self.aux[l].expect("state table of a layer that has state"), net.layers[l].aux_len),
            Slot::History(p) => (self.history[p], self.history_copies * params.layers[p].len),
        };
        keys(t, 0..rows_for(floats, w))
    }

    /// The parameter table of parameter layer `p`.
    pub fn table_of(&self, p: usize) -> TableId {
        self.param_keys[p][0].table
    }
}
