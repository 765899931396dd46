//! `deployer-host crds`: Landscaper's CRDs as the host's model generates them.
//!
//! Owns: the flags and the output. Must not touch: the CRDs themselves (`crate::crds`).

use std::path::PathBuf;

// The command's help text is the doc comment of `Command::Crds`.
#[derive(clap::Args)]
pub struct CrdsArgs {
    /// Write one file per CRD into this directory (the chart's
    /// `charts/wasm-deployer/charts/landscaper-crds/crds`) instead of printing them.
    #[arg(long)]
    out: Option<PathBuf>,
    /// With `--out`: write nothing, fail if the directory's files differ from what the
    /// code generates.
    #[arg(long, requires = "out")]
    check: bool,
}

impl CrdsArgs {
    pub fn run(self) -> anyhow::Result<()> {
        let Some(dir) = self.out else {
            for (_, yaml) in crate::crds::landscaper_files() {
                print!("---\n{yaml}");
            }
            return Ok(());
        };
        let changed = crate::crds::write_landscaper_files(&dir, self.check)?;
        if self.check {
            println!("{}: up to date", dir.display());
        } else {
            println!("{}: {} file(s) written", dir.display(), changed.len());
        }
        Ok(())
    }
}
