//! `deployer-host container init|wait`: the container deployer's containers in the pod.
//!
//! Owns: the subcommands. Must not touch: what they do (`crate::container::runner`).

#[derive(clap::Subcommand)]
pub enum ContainerCommand {
    /// Write the item's imports, Target, component descriptor, blueprint and state into the
    /// shared volume.
    Init,
    /// Wait for the main container, then store its state and exports.
    Wait,
}

impl ContainerCommand {
    pub async fn run(self) -> anyhow::Result<()> {
        use crate::container::runner;
        match self {
            ContainerCommand::Init => runner::run_and_report(runner::init()).await,
            ContainerCommand::Wait => runner::run_and_report(runner::wait()).await,
        }
    }
}
