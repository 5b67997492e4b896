//! Tables and keys as Python sees them: `Table` (the id, name, kind and
//! rows a builder declared) and the conversion of a `(table, rows)` pair,
//! rows as a `range` or any iterable of ints, into geeps row keys. It
//! checks types only; whether rows exist is geeps' call to make.

use geeps_core::{RowKey, Slack, TableId, TableKind};
use pyo3::prelude::*;
use pyo3::types::PyRange;

use crate::errors::ArgumentError;

/// A table declared on a `Builder`.
#[pyclass(module = "geeps._geeps", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Table {
    /// Its id on the instance (declaration order from 0).
    #[pyo3(get)]
    pub id: u32,
    /// The name it was declared with.
    #[pyo3(get)]
    pub name: String,
    /// How many rows it has.
    #[pyo3(get)]
    pub rows: u32,
    /// Whether it is a parameter table (shared, summed) or local.
    #[pyo3(get)]
    pub parameter: bool,
}

#[pymethods]
impl Table {
    fn __repr__(&self) -> String {
        let kind = if self.parameter { "parameter" } else { "local" };
        format!("Table(id={}, name={:?}, rows={}, kind={kind})", self.id, self.name, self.rows)
    }

    fn __index__(&self) -> u32 {
        self.id
    }
}

impl Table {
    pub fn new(id: TableId, name: &str, kind: TableKind, rows: u32) -> Table {
        Table { id: id.0, name: name.to_string(), rows, parameter: kind == TableKind::Parameter }
    }
}

/// A table given as a `Table` or its integer id.
pub fn table_id(obj: &Bound<'_, PyAny>) -> PyResult<TableId> {
    if let Ok(t) = obj.downcast::<Table>() {
        return Ok(TableId(t.get().id));
    }
    obj.extract::<u32>()
        .map(TableId)
        .map_err(|_| ArgumentError::new_err(format!("a table is a geeps.Table or its id (an int >= 0), not {obj}")))
}

/// The keys of `rows` of `table`: a `range` with step 1 or any iterable of ints.
pub fn keys(table: &Bound<'_, PyAny>, rows: &Bound<'_, PyAny>) -> PyResult<Vec<RowKey>> {
    let table = table_id(table)?;
    let bad = || ArgumentError::new_err(format!("rows must be a range or an iterable of ints >= 0, not {rows}"));
    if let Ok(r) = rows.downcast::<PyRange>() {
        let (start, stop, step): (i64, i64, i64) =
            (r.getattr("start")?.extract()?, r.getattr("stop")?.extract()?, r.getattr("step")?.extract()?);
        if start < 0 || stop < 0 || step <= 0 || stop > i64::from(u32::MAX) {
            return Err(bad());
        }
        return Ok((start..stop).step_by(step as usize).map(|row| RowKey { table, row: row as u32 }).collect());
    }
    let mut out = Vec::new();
    for item in rows.try_iter().map_err(|_| bad())? {
        let row: u32 = item?.extract().map_err(|_| bad())?;
        out.push(RowKey { table, row });
    }
    Ok(out)
}

/// A staleness bound from Python: an int >= 0, or `None` for no bound.
pub fn slack(value: Option<i64>) -> PyResult<Slack> {
    match value {
        None => Ok(Slack::Unbounded),
        Some(s) if (0..=i64::from(u32::MAX)).contains(&s) => Ok(Slack::Bounded(s as u32)),
        Some(s) => Err(ArgumentError::new_err(format!("slack must be an int >= 0 or None (async), not {s}"))),
    }
}
