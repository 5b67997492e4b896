//! Table declarations as the wire carries them, to and from geeps-core's
//! `TableSpec`. A declaration of an unknown kind is an error naming the
//! table; it never decides whether a cluster's tables agree.

use geeps_core::{TableKind, TableSpec};

use super::handshake::TableDecl;
use super::kinds::DeclaredKind;

/// The declarations a hello carries for `tables`.
pub(crate) fn table_decls(tables: &[TableSpec]) -> Vec<TableDecl> {
    tables
        .iter()
        .map(|t| TableDecl { name: t.name.clone(), kind: DeclaredKind::from(t.kind).into(), rows: t.rows })
        .collect()
}

/// The tables a hello declares.
pub(crate) fn table_specs(decls: &[TableDecl]) -> Result<Vec<TableSpec>, String> {
    decls
        .iter()
        .map(|d| {
            let kind =
                DeclaredKind::try_from(d.kind).map_err(|k| format!("table `{}` has unknown kind {k}", d.name))?;
            Ok(TableSpec { name: d.name.clone(), kind: TableKind::from(kind), rows: d.rows })
        })
        .collect()
}

impl TableDecl {
    /// Whether the table is partitioned over the keepers (a local table stays on its worker).
    pub(crate) fn is_parameter(&self) -> bool {
        self.kind == u32::from(DeclaredKind::Parameter)
    }
}
