//! The `MemoryData` layer's source: arrays a library caller hands over
//! (`DataCache::feed_memory_data`, as Caffe's `MemoryDataLayer::Reset` or
//! pycaffe's `set_input_arrays`), N items of channels × height × width
//! f32 values and N labels, N a multiple of the layer's batch size. Which
//! items a batch takes (in order, wrapping around) is `data::Cursor`'s job;
//! this module owns checking the arrays against the layer and copying items
//! out, and must never decide the order.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::proto::layer_conf::DataConf;

/// Arrays fed for one MemoryData layer, checked against it.
#[derive(Debug)]
pub struct MemoryData {
    /// The layer's name, for messages (as a path: `Source::path`).
    pub layer: PathBuf,
    pub item: (usize, usize, usize),
    pub data: Vec<f32>,
    pub labels: Vec<f32>,
}

impl MemoryData {
    /// `data` (N × channels × height × width) and `labels` (N) for the
    /// MemoryData layer `conf`: refused unless N is a positive multiple of
    /// its batch size and the lengths agree with its shape.
    pub fn new(conf: &DataConf, data: &[f32], labels: &[f32]) -> Result<MemoryData> {
        let m =
            conf.memory.ok_or_else(|| Error::config(format!("layer `{}` is not a MemoryData layer", conf.source)))?;
        let item = m.channels * m.height * m.width;
        let name = &conf.source;
        let n = labels.len();
        if n == 0 || n % conf.batch_size != 0 {
            return Err(Error::config(format!(
                "MemoryData layer `{name}` was fed {n} labels; feed a positive multiple of its batch_size {} \
                 (Caffe's MemoryDataLayer refuses others too)",
                conf.batch_size
            )));
        }
        if data.len() != n * item {
            return Err(Error::config(format!(
                "MemoryData layer `{name}` was fed {} data values for {n} labels; it needs {n} × {} × {} × {} = {} \
                 (N × channels × height × width, as its memory_data_param says)",
                data.len(),
                m.channels,
                m.height,
                m.width,
                n * item
            )));
        }
        Ok(MemoryData {
            layer: PathBuf::from(name),
            item: (m.channels, m.height, m.width),
            data: data.to_vec(),
            labels: labels.to_vec(),
        })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn item_len(&self) -> usize {
        self.item.0 * self.item.1 * self.item.2
    }

    /// Item `i`'s values.
    pub fn item(&self, i: usize) -> &[f32] {
        let n = self.item_len();
        &self.data[i * n..(i + 1) * n]
    }
}
