//! Where a keeper shard keeps one table's partition: floats it owns, or a
//! slot of the landing of the worker in its own process, so that worker
//! reads the partition where the keeper wrote it (no copy of the keeper's
//! own publication into the landing). Either way the rows are shared with
//! the publications still being sent and written only while nobody else
//! holds them (copy on write). It owns the storage and its sharing; it never
//! decides when rows change or what they hold.

use std::sync::Arc;

use bytes::Bytes;

use crate::transport::bytes::bytes_from_shared;
use crate::transport::landing::LandingSlot;

/// One table's partition on a keeper shard (see the module doc).
#[derive(Clone)]
pub(crate) enum KeeperRows {
    Owned(Arc<Vec<f32>>),
    Landed(Arc<LandingSlot>),
}

/// A landed partition shared as `Bytes`.
struct SharedSlot(Arc<LandingSlot>);

impl AsRef<[u8]> for SharedSlot {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl KeeperRows {
    /// `floats` zeros of its own.
    pub(crate) fn zeros(floats: usize) -> KeeperRows {
        KeeperRows::Owned(Arc::new(vec![0.0; floats]))
    }

    /// `slot` as rows, if it can be viewed as floats (a landing's slots are
    /// aligned for them on every host that hands them out).
    pub(crate) fn landed(slot: LandingSlot) -> Option<KeeperRows> {
        let rows = KeeperRows::Landed(Arc::new(slot));
        rows.try_floats().is_some().then_some(rows)
    }

    fn try_floats(&self) -> Option<&[f32]> {
        match self {
            KeeperRows::Owned(v) => Some(v),
            KeeperRows::Landed(s) if cfg!(target_endian = "little") => bytemuck::try_cast_slice((**s).as_ref()).ok(),
            KeeperRows::Landed(_) => None,
        }
    }

    /// The floats (a landed slot is checked to view as floats when made).
    pub(crate) fn floats(&self) -> &[f32] {
        self.try_floats().unwrap_or_default()
    }

    pub(crate) fn len(&self) -> usize {
        self.floats().len()
    }

    /// The floats to write, when nothing else holds them (no publication,
    /// no reader).
    pub(crate) fn get_mut(&mut self) -> Option<&mut [f32]> {
        match self {
            KeeperRows::Owned(v) => Arc::get_mut(v).map(|v| &mut v[..]),
            KeeperRows::Landed(s) => bytemuck::try_cast_slice_mut(Arc::get_mut(s)?.bytes_mut()).ok(),
        }
    }

    /// The rows as a publication's payload, shared, not copied.
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self {
            KeeperRows::Owned(v) => bytes_from_shared(v.clone()),
            KeeperRows::Landed(s) => Bytes::from_owner(SharedSlot(s.clone())),
        }
    }

    /// Its own floats, for reuse once nothing else holds them (a landed
    /// slot goes back to its landing instead).
    pub(crate) fn into_owned(self) -> Option<Vec<f32>> {
        match self {
            KeeperRows::Owned(v) => Arc::try_unwrap(v).ok(),
            KeeperRows::Landed(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{TableKind, TableSpec};
    use crate::transport::landing::Landing;

    #[test]
    fn landed_rows_are_written_only_while_unshared_and_publish_in_place() {
        let tables = [TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 4 }];
        let landing = Landing::new(&tables, 2, 3);
        let mut rows = KeeperRows::landed(landing.slot(0, 1, 1, 24).unwrap()).unwrap();
        assert_eq!(rows.len(), 6);
        rows.get_mut().unwrap().copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let published = rows.to_bytes();
        assert!(rows.get_mut().is_none(), "a publication holds the rows");
        assert!(rows.clone().into_owned().is_none(), "landed rows are the landing's");
        assert!(landing.contiguous(0, 1, &[&published]), "the rows lie at their partition's place");
        assert_eq!(published.len(), 24);
        drop(published);
        assert!(rows.get_mut().is_some(), "nobody else holds them any more");
        let mut owned = KeeperRows::zeros(2);
        owned.get_mut().unwrap()[1] = 7.0;
        assert_eq!(owned.floats(), [0.0, 7.0]);
        assert_eq!(owned.into_owned(), Some(vec![0.0, 7.0]));
    }
}
