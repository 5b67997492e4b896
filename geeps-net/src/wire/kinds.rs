//! The numbered kinds the wire carries in `u32` fields: what a `Failure`
//! reports, what a declared table is, how update deltas are encoded. Each
//! converts from its field (`TryFrom<u32>`: an unknown number comes back as
//! the error, for the caller to report) and into it (`u32::from`); no other
//! file spells those numbers. It never decodes a frame.

use geeps_core::TableKind;

/// [`Failure::kind`](super::Failure::kind): what a keeper tells a worker went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// The worker's update batch was rejected.
    RejectedBatch = 0,
    /// A rank is gone without leaving.
    PeerLost = 1,
    /// A rank was refused at join; the cluster cannot run without it.
    RefusedAtJoin = 2,
}

/// [`TableDecl::kind`](super::TableDecl::kind): what a declared table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DeclaredKind {
    /// Partitioned over the keepers.
    Parameter = 0,
    /// Kept by its worker alone.
    Local = 1,
}

/// [`UpdateHeader::encoding`](super::UpdateHeader::encoding): how the deltas
/// are encoded. `F32` is 0, so an f32 batch encodes as it did before the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Little-endian f32, 4 bytes a value.
    F32 = 0,
    /// Little-endian bf16, 2 bytes a value.
    Bf16 = 1,
}

impl TryFrom<u32> for FailureKind {
    type Error = u32;

    fn try_from(n: u32) -> Result<Self, u32> {
        match n {
            0 => Ok(FailureKind::RejectedBatch),
            1 => Ok(FailureKind::PeerLost),
            2 => Ok(FailureKind::RefusedAtJoin),
            other => Err(other),
        }
    }
}

impl From<FailureKind> for u32 {
    fn from(kind: FailureKind) -> u32 {
        kind as u32
    }
}

impl TryFrom<u32> for DeclaredKind {
    type Error = u32;

    fn try_from(n: u32) -> Result<Self, u32> {
        match n {
            0 => Ok(DeclaredKind::Parameter),
            1 => Ok(DeclaredKind::Local),
            other => Err(other),
        }
    }
}

impl From<DeclaredKind> for u32 {
    fn from(kind: DeclaredKind) -> u32 {
        kind as u32
    }
}

impl From<TableKind> for DeclaredKind {
    fn from(kind: TableKind) -> Self {
        match kind {
            TableKind::Parameter => DeclaredKind::Parameter,
            TableKind::Local => DeclaredKind::Local,
        }
    }
}

impl From<DeclaredKind> for TableKind {
    fn from(kind: DeclaredKind) -> Self {
        match kind {
            DeclaredKind::Parameter => TableKind::Parameter,
            DeclaredKind::Local => TableKind::Local,
        }
    }
}

impl TryFrom<u32> for Encoding {
    type Error = u32;

    fn try_from(n: u32) -> Result<Self, u32> {
        match n {
            0 => Ok(Encoding::F32),
            1 => Ok(Encoding::Bf16),
            other => Err(other),
        }
    }
}

impl From<Encoding> for u32 {
    fn from(encoding: Encoding) -> u32 {
        encoding as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_survives_the_round_trip_and_unknown_numbers_come_back() {
        for k in [FailureKind::RejectedBatch, FailureKind::PeerLost, FailureKind::RefusedAtJoin] {
            assert_eq!(FailureKind::try_from(u32::from(k)), Ok(k));
        }
        for k in [DeclaredKind::Parameter, DeclaredKind::Local] {
            assert_eq!(DeclaredKind::try_from(u32::from(k)), Ok(k));
            assert_eq!(DeclaredKind::from(TableKind::from(k)), k);
        }
        for e in [Encoding::F32, Encoding::Bf16] {
            assert_eq!(Encoding::try_from(u32::from(e)), Ok(e));
        }
        assert_eq!(FailureKind::try_from(3), Err(3));
        assert_eq!(DeclaredKind::try_from(2), Err(2));
        assert_eq!(Encoding::try_from(7), Err(7));
    }
}
