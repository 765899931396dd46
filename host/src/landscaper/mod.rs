//! Landscaper's API as the host sees it: the shared model crate (`landscaper-model`),
//! re-exported so host code says `crate::landscaper::DeployItem`.
//!
//! The host defines no Landscaper type of its own: the DeployItem, Target, Context and
//! SyncObject it reads and writes with kube are the very types plugins decode.

pub use landscaper_model::codes;
pub use landscaper_model::resources::*;
pub use landscaper_model::{GoDuration, parse_go_duration};
