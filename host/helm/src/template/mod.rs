//! A Go `text/template` engine with Helm's options (`missingkey=zero`), written for exactness:
//! Go's lexing/trim rules, variable scoping, `and`/`or` short-circuit, `eq`/`lt` type rules,
//! method calls on host objects (`.Files.Get "x"`), and error messages with
//! `name:line:col` and the failing node, as Go formats them.

mod exec;
mod lex;
mod parse;

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

pub use exec::Exec;
use parse::Node;

use crate::value::Value;

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

    fn with_name(self, name: &str) -> Self {
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

/// Templates replaced by a scoped parse, with what they replaced (for `tpl`).
pub(crate) type Replaced = Vec<(Rc<str>, Option<Rc<Template>>)>;

/// A named, parsed template.
pub struct Template {
    /// the template's name (file path or `define` name)
    pub name: Rc<str>,
    /// the file it was parsed from
    pub parse_name: Rc<str>,
    /// the source text of that file (for line/column)
    pub src: Rc<str>,
    body: Rc<Vec<Node>>,
}

impl Template {
    fn is_empty_tree(&self) -> bool {
        self.body.iter().all(|n| match n {
            Node::Text(t) => t.trim().is_empty(),
            _ => false,
        })
    }
}

/// A function callable from templates.
pub type Func = fn(&mut Exec, &[Value]) -> Result<Value, FuncError>;

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

/// A set of templates plus the function map: Go's `*template.Template` namespace.
pub struct Engine<'l> {
    pub(crate) templates: RefCell<HashMap<Rc<str>, Rc<Template>>>,
    pub(crate) funcs: HashMap<&'static str, Func>,
    /// `missingkey=error` instead of `missingkey=zero`.
    pub strict: bool,
    pub(crate) include_depth: RefCell<HashMap<String, usize>>,
    /// What `lookup` asks; `None`: no cluster, `lookup` is empty (as in `helm template`).
    pub(crate) lookup: Option<&'l dyn crate::render::Lookup>,
}

impl<'l> Engine<'l> {
    /// Creates an engine with the given function map.
    pub fn new(funcs: HashMap<&'static str, Func>) -> Self {
        Engine {
            templates: RefCell::new(HashMap::new()),
            funcs,
            strict: false,
            include_depth: RefCell::new(HashMap::new()),
            lookup: None,
        }
    }

    /// The engine with `lookup` served by `lookup` (a cluster) instead of empty.
    pub fn with_lookup(mut self, lookup: Option<&'l dyn crate::render::Lookup>) -> Self {
        self.lookup = lookup;
        self
    }

    /// Parses `src` as template `name` (and its `define`s) into the set. Later definitions
    /// replace earlier ones unless they are empty.
    pub fn add(&self, name: &str, src: &str) -> Result<(), TemplateError> {
        let (replaced, _) = self.add_scoped(name, src)?;
        drop(replaced);
        Ok(())
    }

    /// Like [`Engine::add`] but returns the templates that were replaced, so a caller (`tpl`)
    /// can restore them, and the template parsed from `src`'s body. That body is what Go's
    /// `t.New(name).Parse(src)` executes even when it is empty and so does not replace an
    /// existing non-empty template of that name in the set (`AddParseTree` sets `t.Tree` when
    /// `associate` declines): a `tpl ""` inside a `tpl` renders "", not the outer text again.
    pub(crate) fn add_scoped(
        &self,
        name: &str,
        src: &str,
    ) -> Result<(Replaced, Rc<Template>), TemplateError> {
        let out = parse::parse(src).map_err(|e| e.with_name(name))?;
        let src: Rc<str> = Rc::from(src);
        let parse_name: Rc<str> = Rc::from(name);
        let mut replaced = Vec::new();
        let mut set = self.templates.borrow_mut();
        let mut install = |tname: Rc<str>, body: Vec<Node>| {
            let t = Rc::new(Template {
                name: tname.clone(),
                parse_name: parse_name.clone(),
                src: src.clone(),
                body: Rc::new(body),
            });
            if let Some(old) = set.get(&tname)
                && t.is_empty_tree()
                && !old.is_empty_tree()
            {
                return t;
            }
            let prev = set.insert(tname.clone(), t.clone());
            replaced.push((tname, prev));
            t
        };
        for (dname, body) in out.defines {
            install(Rc::from(dname.as_str()), body);
        }
        let main = install(parse_name.clone(), out.body);
        Ok((replaced, main))
    }

    /// Restores templates replaced by [`Engine::add_scoped`].
    pub(crate) fn restore(&self, replaced: Replaced) {
        let mut set = self.templates.borrow_mut();
        for (name, prev) in replaced.into_iter().rev() {
            match prev {
                Some(t) => {
                    set.insert(name, t);
                }
                None => {
                    set.remove(&name);
                }
            }
        }
    }

    /// Whether a template of that name exists.
    pub fn has(&self, name: &str) -> bool {
        self.templates.borrow().contains_key(name)
    }

    pub(crate) fn get(&self, name: &str) -> Option<Rc<Template>> {
        self.templates.borrow().get(name).cloned()
    }

    /// Executes the named template with `data` as dot.
    pub fn execute(&self, name: &str, data: &Value) -> Result<String, TemplateError> {
        let t = self.get(name).ok_or_else(|| {
            TemplateError::Plain(format!(
                "template: no template {name:?} associated with template \"gotpl\""
            ))
        })?;
        let mut out = String::new();
        let mut ex = Exec::new(self, t.clone(), data.clone());
        ex.run(&t, data, &mut out)?;
        Ok(out)
    }
}
