//! A segment tree over positions with two operations, both logarithmic: add
//! a value to every position of a range, and the maximum over a range. The
//! planner uses it to test and claim hand-overs against the profile of held
//! bytes without rescanning long gaps for every candidate.
//!
//! It owns nothing but numbers; it never knows what a position means.

use std::ops::Range;

pub(crate) struct RangeMax {
    len: usize,
    /// Per node: the maximum of its span, counting its own `add` but not its ancestors'.
    max: Vec<u64>,
    /// Per node: a value added to its whole span.
    add: Vec<u64>,
}

impl RangeMax {
    pub(crate) fn new(values: &[u64]) -> Self {
        let len = values.len().max(1);
        let mut t = RangeMax { len, max: vec![0; 4 * len], add: vec![0; 4 * len] };
        t.build(1, 0, len, values);
        t
    }

    fn build(&mut self, node: usize, lo: usize, hi: usize, values: &[u64]) {
        if hi - lo == 1 {
            self.max[node] = values.get(lo).copied().unwrap_or(0);
            return;
        }
        let mid = (lo + hi) / 2;
        self.build(2 * node, lo, mid, values);
        self.build(2 * node + 1, mid, hi, values);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
    }

    /// The maximum over `r`; 0 for an empty range.
    pub(crate) fn max(&self, r: Range<usize>) -> u64 {
        if r.start >= r.end {
            return 0;
        }
        self.max_in(1, 0, self.len, &r)
    }

    fn max_in(&self, node: usize, lo: usize, hi: usize, r: &Range<usize>) -> u64 {
        if r.end <= lo || hi <= r.start {
            return 0;
        }
        if r.start <= lo && hi <= r.end {
            return self.max[node];
        }
        let mid = (lo + hi) / 2;
        self.add[node] + self.max_in(2 * node, lo, mid, r).max(self.max_in(2 * node + 1, mid, hi, r))
    }

    /// Adds `v` to every position of `r`.
    pub(crate) fn add(&mut self, r: Range<usize>, v: u64) {
        if r.start < r.end {
            self.add_in(1, 0, self.len, &r, v);
        }
    }

    fn add_in(&mut self, node: usize, lo: usize, hi: usize, r: &Range<usize>, v: u64) {
        if r.end <= lo || hi <= r.start {
            return;
        }
        if r.start <= lo && hi <= r.end {
            self.add[node] += v;
            self.max[node] += v;
            return;
        }
        let mid = (lo + hi) / 2;
        self.add_in(2 * node, lo, mid, r, v);
        self.add_in(2 * node + 1, mid, hi, r, v);
        self.max[node] = self.add[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn agrees_with_a_plain_array(
            values in proptest::collection::vec(0u64..100, 1..40),
            ops in proptest::collection::vec((0usize..40, 0usize..40, 0u64..50, any::<bool>()), 0..30),
        ) {
            let mut plain = values.clone();
            let mut tree = RangeMax::new(&values);
            for (a, b, v, is_add) in ops {
                let r = a.min(b).min(plain.len())..a.max(b).min(plain.len());
                if is_add {
                    plain[r.clone()].iter_mut().for_each(|x| *x += v);
                    tree.add(r, v);
                } else {
                    let expected = plain[r.clone()].iter().copied().max().unwrap_or(0);
                    prop_assert_eq!(tree.max(r), expected);
                }
            }
            prop_assert_eq!(tree.max(0..plain.len()), plain.iter().copied().max().unwrap());
        }
    }
}
