//! What goes wrong in a template, worded as Go words it: parse errors with `name:line`,
//! execution errors with their stack of `include` frames, and a function's own error.
//!
//! Owns: [`TemplateError`], [`Frame`], [`FuncError`]. Must not touch: lexing, parsing or
//! executing (they stand on this file).

use std::fmt;

/// One level of an execution error (Go wraps errors from `include`).
#[derive(Debug, Clone)]
pub struct Frame {
    /// `file:line:col`
    pub location: String,
    /// name of the template being executed
    pub executing: String,
    /// the node being evaluated, as source text
    pub context: String,
    /// the message of this level
    pub message: String,
}

/// A template parse or execution error.
#[derive(Debug, Clone)]
pub enum TemplateError {
    /// Parse error (`name` is filled in by the caller).
    Parse {
        name: String,
        line: usize,
        msg: String,
    },
    /// Execution error; outermost frame first.
    Exec { frames: Vec<Frame> },
    /// Error without location (e.g. unknown template).
    Plain(String),
}

impl TemplateError {
    pub(crate) fn parse(src: &str, pos: usize, msg: &str) -> Self {
        let pos = pos.min(src.len());
        let line = 1 + src.as_bytes()[..pos]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        TemplateError::Parse {
            name: String::new(),
            line,
            msg: msg.to_string(),
        }
    }

    pub(super) fn with_name(self, name: &str) -> Self {
        match self {
            TemplateError::Parse { line, msg, .. } => TemplateError::Parse {
                name: name.to_string(),
                line,
                msg,
            },
            e => e,
        }
    }

    /// Helm 4's multi-line rendering of an execution error (`reformatExecErrorMsg`).
    pub fn helm_message(&self) -> String {
        match self {
            TemplateError::Parse { name, line, msg } => {
                format!("parse error at ({name}:{line}): {msg}")
            }
            TemplateError::Plain(m) => m.clone(),
            TemplateError::Exec { frames } => {
                if let Some(f) = frames.first()
                    && let Some(start) = f.message.find("HELM_ERR_START")
                {
                    let rest = &f.message[start + 14..];
                    let end = rest.find("HELM_ERR_END").unwrap_or(rest.len());
                    return format!("execution error at ({}): {}", f.location, &rest[..end]);
                }
                let mut out = String::new();
                for f in frames {
                    let msg = match f.message.find(" template:") {
                        Some(i) => &f.message[..i],
                        None => &f.message,
                    };
                    out.push_str(&format!(
                        "{}\n  executing \"{}\" at <{}>:\n    {}\n",
                        f.location, f.executing, f.context, msg
                    ));
                }
                out.trim().to_string()
            }
        }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::Parse { name, line, msg } => write!(f, "template: {name}:{line}: {msg}"),
            TemplateError::Plain(m) => write!(f, "{m}"),
            TemplateError::Exec { frames } => {
                if let Some(fr) = frames.first() {
                    write!(
                        f,
                        "template: {}: executing \"{}\" at <{}>: {}",
                        fr.location, fr.executing, fr.context, fr.message
                    )
                } else {
                    write!(f, "template: execution error")
                }
            }
        }
    }
}

impl std::error::Error for TemplateError {}

/// Error raised by a function.
#[derive(Debug)]
pub enum FuncError {
    /// Argument conversion failure (Go reports it without "error calling").
    Arg(String),
    /// The function returned an error.
    Call(String),
    /// A nested template error (from `include`/`tpl`).
    Nested(String, Box<TemplateError>),
}

impl FuncError {
    /// Shorthand for a function error.
    pub fn call(msg: impl Into<String>) -> Self {
        FuncError::Call(msg.into())
    }
}
