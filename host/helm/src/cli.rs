//! The `helm template` command line (`deployer-host helm template …`): flags as a `clap::Args`
//! struct and an entry point that prints the same stream (and error texts) as Helm.

use std::path::PathBuf;

use crate::chart::Chart;
use crate::render::{RenderError, RenderOptions, render};

/// Flags and arguments of `helm template [NAME] CHART`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TemplateArgs {
    /// `[NAME] CHART`: optional release name, then the chart directory or `.tgz`.
    #[arg(value_name = "NAME_OR_CHART", num_args = 0..=2)]
    pub args: Vec<String>,
    /// Values files (`-f a.yaml -f b.yaml`).
    #[arg(short = 'f', long = "values")]
    pub values: Vec<PathBuf>,
    /// `--set k=v[,k2=v2]`
    #[arg(long = "set")]
    pub set: Vec<String>,
    /// `--set-string k=v`
    #[arg(long = "set-string")]
    pub set_string: Vec<String>,
    /// Template for the release name.
    #[arg(long = "name-template")]
    pub name_template: Option<String>,
    /// Release name (default `release-name`).
    #[arg(long = "release-name")]
    pub release_name: Option<String>,
    /// Namespace (default `default`).
    #[arg(short = 'n', long = "namespace")]
    pub namespace: Option<String>,
    /// Kubernetes version for `.Capabilities` (default v1.36.0).
    #[arg(long = "kube-version")]
    pub kube_version: Option<String>,
    /// Extra API versions for `.Capabilities.APIVersions` (comma-separated or repeated).
    #[arg(short = 'a', long = "api-versions")]
    pub api_versions: Vec<String>,
    /// Print the chart's `crds/` too.
    #[arg(long = "include-crds")]
    pub include_crds: bool,
    /// Only print these templates (globs).
    #[arg(short = 's', long = "show-only")]
    pub show_only: Vec<String>,
    /// Leave out test hooks.
    #[arg(long = "skip-tests")]
    pub skip_tests: bool,
    /// Do not validate values against `values.schema.json`.
    #[arg(long = "skip-schema-validation")]
    pub skip_schema_validation: bool,
    /// Render as an upgrade (`.Release.IsUpgrade`).
    #[arg(long = "is-upgrade")]
    pub is_upgrade: bool,
    /// Print the rendered files even when they are not valid YAML.
    #[arg(long = "debug")]
    pub debug: bool,
}

/// What `helm template` writes: stdout, and the error (without the `Error: ` prefix).
#[derive(Debug, Clone, Default)]
pub struct TemplateOutput {
    pub stdout: String,
    pub error: Option<String>,
}

/// Runs `helm template` and returns stdout and the error message, like the real command.
pub fn cli_template_output(a: &TemplateArgs) -> TemplateOutput {
    let fail = |e: String| TemplateOutput {
        stdout: String::new(),
        error: Some(e),
    };
    let (name, chart_path) = match a.args.as_slice() {
        [] => {
            return fail("\"helm template\" requires at least 1 argument\n\nUsage:  helm template [NAME] [CHART] [flags]".into());
        }
        [c] => (None, c.clone()),
        [n, c, ..] => (Some(n.clone()), c.clone()),
    };
    let chart = match Chart::load(&chart_path) {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    let mut opts = RenderOptions::default();
    if let Some(n) = name.or_else(|| a.release_name.clone()) {
        opts.release_name = n;
    }
    opts.name_template = a.name_template.clone();
    if let Some(ns) = &a.namespace {
        opts.namespace = ns.clone();
    }
    for f in &a.values {
        match std::fs::read_to_string(f) {
            Ok(s) => opts.values_files.push(s),
            Err(e) => return fail(format!("open {}: {e}", f.display())),
        }
    }
    opts.set = a.set.clone();
    opts.set_string = a.set_string.clone();
    opts.kube_version = a.kube_version.clone();
    opts.api_versions = a.api_versions.clone();
    opts.include_crds = a.include_crds;
    opts.is_upgrade = a.is_upgrade;
    opts.skip_schema_validation = a.skip_schema_validation;
    match render(&chart, &opts) {
        Ok(r) => match r.to_template_stream(&a.show_only, a.skip_tests) {
            Ok(s) => TemplateOutput {
                stdout: s,
                error: None,
            },
            Err(e) => fail(e.to_string()),
        },
        Err(RenderError::Yaml {
            path,
            message,
            partial,
        }) => {
            let msg = format!("YAML parse error on {path}: {message}");
            if a.debug {
                TemplateOutput {
                    stdout: format!("{}\n", partial.trim()),
                    error: Some(msg),
                }
            } else {
                fail(format!(
                    "{msg}\n\nUse --debug flag to render out invalid YAML"
                ))
            }
        }
        Err(e) => fail(e.to_string()),
    }
}

/// Runs `helm template`; the error carries Helm's message.
pub fn cli_template(a: &TemplateArgs) -> anyhow::Result<String> {
    let out = cli_template_output(a);
    match out.error {
        None => Ok(out.stdout),
        Some(e) => Err(anyhow::anyhow!(e)),
    }
}
