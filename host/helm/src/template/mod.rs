//! A Go `text/template` engine with Helm's options (`missingkey=zero`), written for exactness:
//! Go's lexing/trim rules, variable scoping, `and`/`or` short-circuit, `eq`/`lt` type rules,
//! method calls on host objects (`.Files.Get "x"`), and error messages with
//! `name:line:col` and the failing node, as Go formats them.

mod error;
mod exec;
mod lex;
mod lookup;
mod parse;

pub use error::{Frame, FuncError, TemplateError};
pub use exec::{Engine, Exec, Func, Template};
pub use lookup::Lookup;
