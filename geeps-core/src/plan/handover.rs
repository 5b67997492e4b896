//! Buffer hand-overs between local accesses, found in the recording.
//!
//! A layer posts its output blob with `save = true` and the next layer
//! accesses the same rows with `fetch = true` right after. Saving the buffer
//! to the store and copying it straight back puts two copies between two
//! layers' compute, where no prefetch can hide them. A hand-over gives the
//! posted buffer itself to the next access instead; the save is carried by
//! the buffer and done when the last access of the chain posts it (off the
//! critical path), or earlier if the application leaves the recorded order.
//!
//! A fetched buffer posted without saving holds the stored rows too (a
//! `save = false` post declares it unchanged, or its changes unwanted), so it
//! is handed over the same way when nothing wrote those rows while it was
//! held: a blob's data read by two consecutive backward layers is fetched
//! once.
//!
//! This file only finds the pairs; it never decides placement (the planner
//! keeps a pair only while its rows are not pinned) and never moves data.

use std::collections::{HashMap, HashSet};

use crate::plan::recorder::{OpKind, RecordedOp};
use crate::table::RowKey;

/// One hand-over: the buffer of the local access at `source`, posted at
/// `release` (saving, or unchanged from its fetch), serves the access at
/// `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Handover {
    pub(crate) source: usize,
    pub(crate) release: usize,
    pub(crate) target: usize,
}

fn tables_of(keys: &[RowKey]) -> Vec<u32> {
    let mut t: Vec<u32> = keys.iter().map(|k| k.table.0).collect();
    t.sort_unstable();
    t.dedup();
    t
}

/// Every pair where the next acquisition touching a posted local access's
/// rows is a fetching local access of exactly the same key list, and no other
/// acquisition touches those rows until that access is released. The post
/// saves, or the source fetched and no other acquisition touched its rows
/// while it was held (its buffer is then the store's rows). Positions do not
/// wrap around the end of the recording.
pub(crate) fn find(ops: &[RecordedOp]) -> Vec<Handover> {
    let tables: Vec<Vec<u32>> = ops.iter().map(|op| tables_of(&op.keys)).collect();
    // Acquisition positions per table, ascending: only those can overlap.
    let mut by_table: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, _) in ops.iter().enumerate().filter(|(_, op)| op.kind.is_acquire()) {
        for &t in &tables[i] {
            by_table.entry(t).or_default().push(i);
        }
    }
    let mut targeted = vec![false; ops.len()];
    let mut pairs = Vec::new();
    for (release, op) in ops.iter().enumerate() {
        let OpKind::PostLocalAccess { acquire: source, save, discard: false } = op.kind else { continue };
        let fetched = matches!(ops[source].kind, OpKind::LocalAccess { fetch: true });
        if !save && !fetched {
            continue;
        }
        let keys = &ops[source].keys;
        if keys.is_empty() {
            continue;
        }
        let rows: HashSet<RowKey> = keys.iter().copied().collect();
        // The first acquisition in (after, before) touching these rows.
        let first_overlap = |after: usize, before: usize| {
            let mut candidates: Vec<usize> = tables[source]
                .iter()
                .filter_map(|t| by_table.get(t))
                .flat_map(|list| {
                    list[list.partition_point(|&p| p <= after)..].iter().copied().take_while(|&p| p < before)
                })
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            candidates.into_iter().find(|&i| ops[i].keys.iter().any(|k| rows.contains(k)))
        };
        if !save && first_overlap(source, release).is_some() {
            continue;
        }
        let Some(target) = first_overlap(release, ops.len()) else { continue };
        let same = ops[target].keys[..] == keys[..];
        if !same || targeted[target] || !matches!(ops[target].kind, OpKind::LocalAccess { fetch: true }) {
            continue;
        }
        let Some(end) = ops[target].release else { continue };
        if first_overlap(target, end).is_some() {
            continue;
        }
        targeted[target] = true;
        pairs.push(Handover { source, release, target });
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::recorder::Recorder;
    use crate::table::{keys, TableId};
    use std::sync::Arc;

    fn local(r: &mut Recorder, rows: std::ops::Range<u32>, fetch: bool) -> usize {
        r.acquire(OpKind::LocalAccess { fetch }, Arc::from(keys(TableId(0), rows)))
    }

    fn post(r: &mut Recorder, a: usize, save: bool) -> usize {
        r.release(a, OpKind::PostLocalAccess { acquire: a, save, discard: false }, "local_access").unwrap()
    }

    #[test]
    fn a_saved_blob_read_next_is_handed_over() {
        let mut r = Recorder::default();
        let out = local(&mut r, 0..4, false);
        let out_post = post(&mut r, out, true);
        let input = local(&mut r, 0..4, true);
        post(&mut r, input, false);
        assert_eq!(find(&r.ops), vec![Handover { source: out, release: out_post, target: input }]);
    }

    /// Pairs found in: an access of rows 0..4 (fetching if `fetched`)
    /// posted with `save`, then an access of `next` rows with `fetch`, posted
    /// without saving.
    fn pairs_after(fetched: bool, save: bool, next: std::ops::Range<u32>, fetch: bool) -> Vec<Handover> {
        let mut r = Recorder::default();
        let a = local(&mut r, 0..4, fetched);
        post(&mut r, a, save);
        let b = local(&mut r, next, fetch);
        post(&mut r, b, false);
        find(&r.ops)
    }

    #[test]
    fn no_hand_over_without_stored_contents_fetch_or_the_same_keys() {
        assert!(pairs_after(false, false, 0..4, true).is_empty(), "neither saved nor fetched: garbage");
        assert!(pairs_after(true, true, 0..4, false).is_empty(), "next access does not fetch");
        assert!(pairs_after(true, true, 2..6, true).is_empty(), "other keys overlap: the store must be read");
        assert_eq!(pairs_after(true, true, 0..4, true).len(), 1, "the same case with everything in place");
    }

    #[test]
    fn a_fetched_buffer_posted_unchanged_is_handed_over() {
        assert_eq!(pairs_after(true, false, 0..4, true).len(), 1);
    }

    #[test]
    fn no_unsaved_hand_over_when_the_rows_were_written_while_held() {
        // `a` was fetched before `w` wrote rows 2..3: its buffer is stale.
        let mut r = Recorder::default();
        let a = local(&mut r, 0..4, true);
        let w = local(&mut r, 2..3, false);
        post(&mut r, w, true);
        post(&mut r, a, false);
        let b = local(&mut r, 0..4, true);
        post(&mut r, b, false);
        assert!(find(&r.ops).is_empty());
    }

    #[test]
    fn a_discarded_buffer_is_never_handed_over() {
        let mut r = Recorder::default();
        let a = local(&mut r, 0..4, true);
        r.release(a, OpKind::PostLocalAccess { acquire: a, save: false, discard: true }, "local_access").unwrap();
        let b = local(&mut r, 0..4, true);
        post(&mut r, b, false);
        assert!(find(&r.ops).is_empty());
    }

    #[test]
    fn no_hand_over_when_the_rows_are_accessed_while_the_target_is_held() {
        let mut r = Recorder::default();
        let a = local(&mut r, 0..4, true);
        post(&mut r, a, true);
        let b = local(&mut r, 0..4, true);
        let c = local(&mut r, 3..4, true);
        post(&mut r, c, false);
        post(&mut r, b, false);
        assert!(find(&r.ops).is_empty());
    }

    #[test]
    fn unrelated_rows_in_between_do_not_matter_and_chains_are_found() {
        let mut r = Recorder::default();
        let a = local(&mut r, 0..4, true);
        let pa = post(&mut r, a, true);
        let other = local(&mut r, 4..8, true);
        post(&mut r, other, true);
        let b = local(&mut r, 0..4, true);
        let pb = post(&mut r, b, true);
        let c = local(&mut r, 0..4, true);
        post(&mut r, c, false);
        assert_eq!(
            find(&r.ops),
            vec![Handover { source: a, release: pa, target: b }, Handover { source: b, release: pb, target: c }]
        );
    }
}
