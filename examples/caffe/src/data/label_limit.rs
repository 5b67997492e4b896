//! The class count every label of a data source must stay below, and the
//! layer that sets it. Must never read data itself.

/// The class count a net scores, which every label must stay below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelLimit {
    pub classes: usize,
    /// The loss or accuracy layer that sets it.
    pub layer: String,
}
