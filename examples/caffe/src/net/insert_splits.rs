//! Caffe's automatic Split layers: when one blob (one producer's top, as
//! an in-place layer makes a new version of a name) feeds several bottoms,
//! a Split layer right after the producer copies it once per consumer, and
//! each consumer reads its own copy, so backward sums their gradients. Names
//! follow Caffe's: layer `{blob}_{layer}_{top}_split`, tops
//! `{blob}_{layer}_{top}_split_{k}`. It owns that rewriting of names; it
//! must never look at shapes or layer types.

use std::collections::HashMap;

/// One layer of the rewritten net.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The input layer it is, or (for a split) the one whose top it copies.
    pub layer: usize,
    /// Some(number of tops) for an inserted Split layer.
    pub split: Option<usize>,
    pub name: String,
    pub bottoms: Vec<String>,
    pub tops: Vec<String>,
}

/// A layer as the rewriting sees it: name, bottoms, tops.
pub type Wiring<'a> = (&'a str, &'a [String], &'a [String]);

/// The layers with Split layers inserted where a blob has several consumers.
/// Bottoms that no earlier layer produces are left alone (the caller reports them).
pub fn insert(layers: &[Wiring<'_>]) -> Vec<Planned> {
    // Pass 1: how many bottoms read each (producer, top index).
    let mut producer: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut readers: HashMap<(usize, usize), usize> = HashMap::new();
    let mut source: Vec<Vec<Option<(usize, usize)>>> = Vec::with_capacity(layers.len());
    for (i, (_, bottoms, tops)) in layers.iter().enumerate() {
        let src: Vec<_> = bottoms.iter().map(|b| producer.get(b.as_str()).copied()).collect();
        for key in src.iter().flatten() {
            *readers.entry(*key).or_default() += 1;
        }
        source.push(src);
        for (k, t) in tops.iter().enumerate() {
            producer.insert(t.as_str(), (i, k));
        }
    }
    // Pass 2: rename split bottoms, and add each Split after its producer.
    let split_name = |(i, k): (usize, usize)| format!("{}_{}_{k}_split", layers[i].2[k], layers[i].0);
    let mut taken: HashMap<(usize, usize), usize> = HashMap::new();
    let mut out = Vec::with_capacity(layers.len());
    for (i, (name, bottoms, tops)) in layers.iter().enumerate() {
        let bottoms = bottoms
            .iter()
            .zip(&source[i])
            .map(|(b, src)| match src {
                Some(key) if readers[key] > 1 => {
                    let n = taken.entry(*key).or_default();
                    *n += 1;
                    format!("{}_{}", split_name(*key), *n - 1)
                }
                _ => b.clone(),
            })
            .collect();
        out.push(Planned { layer: i, split: None, name: name.to_string(), bottoms, tops: tops.to_vec() });
        for (k, t) in tops.iter().enumerate() {
            let n = readers.get(&(i, k)).copied().unwrap_or(0);
            if n > 1 {
                let base = split_name((i, k));
                out.push(Planned {
                    layer: i,
                    split: Some(n),
                    tops: (0..n).map(|s| format!("{base}_{s}")).collect(),
                    name: base,
                    bottoms: vec![t.clone()],
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn splits_follow_caffe() {
        let (none, data, conv_in, conv1) = (s(&[]), s(&["data", "label"]), s(&["data"]), s(&["conv1"]));
        let (pool, twice, sum, loss_in, loss) =
            (s(&["pool"]), s(&["conv1", "conv1"]), s(&["sum"]), s(&["sum", "label"]), s(&["loss"]));
        let layers: Vec<Wiring<'_>> = vec![
            ("d", &none, &data),
            ("conv1", &conv_in, &conv1),
            // In place: reads conv1 (version 1), makes version 2.
            ("relu1", &conv1, &conv1),
            ("pool1", &conv1, &pool),
            ("sum", &twice, &sum),
            ("loss", &loss_in, &loss),
        ];
        let plan = insert(&layers);
        let names: Vec<_> = plan.iter().map(|p| p.name.as_str()).collect();
        // Version 2 of conv1 feeds pool1 and sum twice; the data layer's
        // label feeds one layer (no split); conv1's first version one (relu1).
        assert_eq!(names, ["d", "conv1", "relu1", "conv1_relu1_0_split", "pool1", "sum", "loss"]);
        let split = &plan[3];
        assert_eq!((split.layer, split.split), (2, Some(3)));
        assert_eq!(split.bottoms, s(&["conv1"]));
        assert_eq!(split.tops, s(&["conv1_relu1_0_split_0", "conv1_relu1_0_split_1", "conv1_relu1_0_split_2"]));
        assert_eq!(plan[4].bottoms, s(&["conv1_relu1_0_split_0"]));
        assert_eq!(plan[5].bottoms, s(&["conv1_relu1_0_split_1", "conv1_relu1_0_split_2"]));
        assert_eq!(plan[2].bottoms, s(&["conv1"]));
        assert_eq!(plan[6].bottoms, loss_in);
        assert!(plan.iter().all(|p| p.split.is_some() || p.name == layers[p.layer].0));
    }

    #[test]
    fn unknown_bottoms_are_left_for_the_caller() {
        let (b, t) = (s(&["nowhere"]), s(&["x"]));
        let plan = insert(&[("a", &b, &t)]);
        assert_eq!(plan[0].bottoms, b);
    }
}
