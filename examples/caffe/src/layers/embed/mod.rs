//! Caffe's `Embed`: each bottom value, an index below `input_dim`, picks a
//! row of the learned table (`input_dim` × `num_output`), plus an optional
//! bias; the top has the bottom's axes and `num_output` more. Backward adds
//! the top gradient into the picked rows; the indexes get a zero gradient
//! (Caffe refuses to propagate to them). An index outside the table is a
//! bad input and stops the run, naming it. It owns this lookup only; it
//! has GPU code (`gpu`).

mod gpu;

use crate::layers::layer::{count, Backward, Forward, Layer, ParamBlob, Reads, Shape};
use crate::proto::standard_conf::EmbedConf;

#[derive(Debug)]
pub struct Embed {
    conf: EmbedConf,
    bottom: Shape,
}

impl Embed {
    pub fn new(conf: EmbedConf, bottom: &Shape) -> Result<Embed, String> {
        if conf.num_output == 0 || conf.input_dim == 0 {
            return Err("num_output and input_dim must be at least 1".into());
        }
        Ok(Embed { conf, bottom: bottom.clone() })
    }

    fn row(&self, v: f32) -> usize {
        let i = v as usize;
        assert!(
            v >= 0.0 && v.fract() == 0.0 && i < self.conf.input_dim,
            "Embed: index {v} is not an integer from 0 to input_dim - 1 = {}",
            self.conf.input_dim - 1
        );
        i
    }
}

impl Layer for Embed {
    crate::layers::gpu_methods!();

    fn type_name(&self) -> &'static str {
        "Embed"
    }

    fn top_shapes(&self) -> Vec<Shape> {
        let mut s = self.bottom.clone();
        s.push(self.conf.num_output);
        vec![s]
    }

    fn param_blobs(&self) -> Vec<ParamBlob> {
        let mut p = vec![ParamBlob {
            shape: vec![self.conf.input_dim, self.conf.num_output],
            filler: self.conf.weight_filler.clone(),
        }];
        if self.conf.bias_term {
            p.push(ParamBlob { shape: vec![self.conf.num_output], filler: self.conf.bias_filler.clone() });
        }
        p
    }

    fn backward_reads(&self) -> Reads {
        Reads { bottoms: vec![true], tops: false, top_diffs: true }
    }

    fn forward(&self, f: Forward<'_, '_>) {
        let n = self.conf.num_output;
        let (w, bias) = f.params.split_at(self.conf.input_dim * n);
        for (&v, y) in f.bottoms[0][..count(&self.bottom)].iter().zip(f.tops[0].chunks_exact_mut(n)) {
            let r = self.row(v);
            y.copy_from_slice(&w[r * n..(r + 1) * n]);
            if self.conf.bias_term {
                y.iter_mut().zip(bias).for_each(|(y, b)| *y += b);
            }
        }
    }

    fn backward(&self, b: Backward<'_, '_>) {
        if let Some(dx) = b.bottom_diffs.first_mut() {
            dx.fill(0.0);
        }
        let n = self.conf.num_output;
        let (gw, gb) = b.param_grad.split_at_mut(self.conf.input_dim * n);
        gw.fill(0.0);
        gb.fill(0.0);
        let dy = b.top_diffs[0];
        if dy.is_empty() {
            return;
        }
        for (&v, g) in b.bottoms[0][..count(&self.bottom)].iter().zip(dy.chunks_exact(n)) {
            let r = self.row(v);
            gw[r * n..(r + 1) * n].iter_mut().zip(g).for_each(|(a, g)| *a += g);
            if self.conf.bias_term {
                gb.iter_mut().zip(g).for_each(|(a, g)| *a += g);
            }
        }
    }
}
