//! `deployer-host`: parses the command line, starts telemetry and runs the command
//! ([`deployer_host::cli`]). Nothing else — but the error that ends a command is printed here,
//! as the API server's message (never a debug dump of its `Status`:
//! [`deployer_host::apierrors::render_chain`]).

use clap::Parser;
use deployer_host::cli::Cli;
use deployer_host::telemetry;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    match cli.command.run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", deployer_host::apierrors::render_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}
