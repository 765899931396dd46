//! The Landscaper deployer contract, implemented once for every plugin.
//!
//! Pure decisions only: who is responsible for an item ([`responsibility`]), what a reconcile must
//! do with it ([`job`]), how its status changes ([`status`]), when its progressing timeout fires
//! ([`timeout`]), the rules around one plugin step ([`step`]), and how a Target's content is
//! resolved ([`target`]). The controller performs the
//! reads and writes these functions ask for; nothing in here talks to an API server or a plugin.

pub mod job;
pub mod responsibility;
pub mod status;
pub mod step;
pub mod target;
pub mod timeout;

pub use job::{JobStep, next_step};
pub use responsibility::ItemRoute;
pub use status::StepError;
pub use timeout::{CheckpointMode, ProgressingTimeout};
