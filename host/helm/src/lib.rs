//! Helm-exact chart rendering engine.
//!
//! Renders Helm charts the way `helm template` does, byte for byte, without Go: a Go
//! `text/template` engine ([`template`]), Sprig and Helm functions ([`funcs`]), go-yaml v2 /
//! sigs.k8s.io/yaml compatibility ([`yaml`]), Go JSON ([`json`]), chart loading ([`chart`]),
//! values ([`values`]), dependencies ([`deps`]), schema validation ([`schema`]), manifest sorting
//! ([`sort`]), the render driver ([`render`]) and the `helm template` CLI ([`cli`]).
//!
//! ```no_run
//! use helm_engine::{Chart, RenderOptions, render};
//! let chart = Chart::load_dir("charts/nginx").unwrap();
//! let out = render(&chart, &RenderOptions::default()).unwrap();
//! print!("{}", out.to_template_stream(&[], false).unwrap());
//! ```

pub mod chart;
pub mod cli;
pub mod deps;
pub mod funcs;
pub mod glob;
pub mod gofmt;
pub mod json;
pub mod objects;
pub mod render;
pub mod schema;
pub mod sort;
pub mod strconv;
pub mod template;
pub mod value;
pub mod values;
pub mod yaml;

pub use chart::{Chart, LoadError};
pub use cli::{TemplateArgs, TemplateOutput, cli_template, cli_template_output};
pub use render::{ClusterCapabilities, Lookup, RenderError, RenderOptions, Rendered, render};
