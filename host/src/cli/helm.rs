//! `deployer-host helm template`: Helm-exact chart rendering from the command line.
//!
//! Owns: the exit code and the output streams. Must not touch: rendering (`helm-engine`).

#[derive(clap::Subcommand)]
pub enum HelmCommand {
    /// Render a chart like `helm template`: same flags, same output stream.
    Template {
        #[command(flatten)]
        args: helm_engine::TemplateArgs,
    },
}

impl HelmCommand {
    pub fn run(self) -> anyhow::Result<()> {
        let HelmCommand::Template { args } = self;
        let out = helm_engine::cli_template_output(&args);
        print!("{}", out.stdout);
        match out.error {
            None => Ok(()),
            Some(e) => {
                eprintln!("Error: {e}");
                std::process::exit(1);
            }
        }
    }
}
