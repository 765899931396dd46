//! Logging setup: `tracing` to stderr, as text or JSON, filtered by `RUST_LOG`
//! (default `info`, with kube's own chatter at `warn`); and the line that ends a failed command,
//! in the same format, so that every line a JSON-logging host writes is JSON (a log collector
//! would otherwise drop or split the one line that says why the host stopped).

use tracing_subscriber::EnvFilter;

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber. Safe to call once per process.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new("info,kube=warn,kube_runtime=warn,tower=warn,hyper=warn")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
}

/// Prints why the command failed, as the last line of the log: a JSON line with `--log-format
/// json`, else `Error: <message>`.
pub fn report_failure(format: LogFormat, message: &str) {
    match format {
        LogFormat::Json => tracing::error!(error = message, "the command failed"),
        LogFormat::Text => eprintln!("Error: {message}"),
    }
}

/// A command line clap refused, before logging started: as a JSON line when the command line or
/// `DEPLOYER_LOG_FORMAT` asks for JSON, else as clap prints it. Help and version are printed as
/// asked.
pub fn report_refused_command_line(error: clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    let json = asks_for_json(
        std::env::args().skip(1),
        std::env::var("DEPLOYER_LOG_FORMAT").ok().as_deref(),
    );
    let shown_as_asked = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if !json || shown_as_asked {
        error.exit()
    }
    init(LogFormat::Json);
    let message = error.render().to_string();
    tracing::error!(error = message.trim_end(), "the command line was refused");
    std::process::ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
}

/// Whether the command line (or else the environment) sets the log format to JSON, read by hand
/// because clap refused the command line as a whole.
fn asks_for_json(args: impl Iterator<Item = String>, env: Option<&str>) -> bool {
    let mut from_args = None;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        if let Some(value) = arg.strip_prefix("--log-format=") {
            from_args = Some(value.to_string());
        } else if arg == "--log-format" {
            from_args = args.next();
        }
    }
    from_args.as_deref().or(env) == Some("json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> impl Iterator<Item = String> {
        line.split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn json_is_asked_for_by_flag_or_environment() {
        assert!(asks_for_json(args("--log-format json bogus"), None));
        assert!(asks_for_json(args("run --log-format=json --bad"), None));
        assert!(asks_for_json(args("run --bad"), Some("json")));
        assert!(!asks_for_json(args("--log-format text run"), Some("json")));
        assert!(!asks_for_json(args("run --bad"), None));
        assert!(!asks_for_json(args("--log-format"), None));
    }
}
