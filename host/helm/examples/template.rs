//! `cargo run -p helm-engine --example template -- [NAME] CHART [flags]`: the `helm template`
//! entry point the host binary exposes as `deployer-host helm template`.

use clap::Parser;
use helm_engine::{TemplateArgs, cli_template_output};

#[derive(Parser)]
#[command(name = "helm-template")]
struct Cmd {
    #[command(flatten)]
    args: TemplateArgs,
}

fn main() {
    let cmd = Cmd::parse();
    let out = cli_template_output(&cmd.args);
    print!("{}", out.stdout);
    if let Some(e) = out.error {
        eprintln!("Error: {e}");
        std::process::exit(1);
    }
}
