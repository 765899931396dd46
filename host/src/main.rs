//! `deployer-host`: parses the command line, starts telemetry and runs the command
//! ([`deployer_host::cli`]). Nothing else — but the error that ends a command is printed here,
//! as the API server's message (never a debug dump of its `Status`:
//! [`deployer_host::apierrors::render_chain`]), in the log's format (JSON with `--log-format
//! json`, even for a command line that was refused before logging started).

use clap::Parser as _;

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use deployer_host::cli::Cli;
use deployer_host::telemetry;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(refused) => return telemetry::report_refused_command_line(refused),
    };
    let log_format = cli.log_format;
    telemetry::init(log_format);
    match cli.command.run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let message = deployer_host::apierrors::render_chain(&e);
            telemetry::report_failure(log_format, &message);
            std::process::ExitCode::FAILURE
        }
    }
}
