//! The `SyncObject` resource (`landscaper.gardener.cloud/v1alpha1`, contract section 1.6),
//! from the shared model.

pub use crate::landscaper::{SyncObject, SyncObjectSpec};
