//! Execution of parsed templates with Go's semantics (see `text/template/exec.go`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::error::{Frame, FuncError, TemplateError};
use super::lookup::Lookup;
use super::parse::{self, Arg, Branch, Cmd, Node, Pipe};
use crate::value::Value;

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

/// A set of templates plus the function map: Go's `*template.Template` namespace.
pub struct Engine<'l> {
    pub(crate) templates: RefCell<HashMap<Rc<str>, Rc<Template>>>,
    pub(crate) funcs: HashMap<&'static str, Func>,
    /// `missingkey=error` instead of `missingkey=zero`.
    pub strict: bool,
    pub(crate) include_depth: RefCell<HashMap<String, usize>>,
    /// What `lookup` asks; `None`: no cluster, `lookup` is empty (as in `helm template`).
    pub(crate) lookup: Option<&'l dyn Lookup>,
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
    pub fn with_lookup(mut self, lookup: Option<&'l dyn Lookup>) -> Self {
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

/// Maximum `template`/`include` nesting depth (Go allows 100000; kept lower for wasm stacks).
const MAX_DEPTH: usize = 10000;

enum Flow {
    Normal,
    Break,
    Continue,
}

/// Execution state of one template invocation.
pub struct Exec<'e> {
    /// The engine (template set and functions).
    pub eng: &'e Engine<'e>,
    /// Variables: name, value, and whether the value is a nil *interface* (a `range` element)
    /// rather than an invalid value (what a pipeline yields for nil); see `eval_field_chain`.
    vars: Vec<(Rc<str>, Value, bool)>,
    tmpl: Rc<Template>,
    depth: usize,
    /// Dot is a nil interface: a nil element of the list or map being ranged over.
    nil_iface_dot: bool,
}

type R<T> = Result<T, TemplateError>;

impl<'e> Exec<'e> {
    pub(crate) fn new(eng: &'e Engine<'e>, tmpl: Rc<Template>, data: Value) -> Self {
        Exec {
            eng,
            vars: vec![(Rc::from("$"), data, false)],
            tmpl,
            depth: 0,
            nil_iface_dot: false,
        }
    }

    /// Runs a template body with `dot`, writing into `out`.
    pub(crate) fn run(&mut self, t: &Rc<Template>, dot: &Value, out: &mut String) -> R<()> {
        let body = t.body.clone();
        self.walk_list(out, dot, &body)?;
        Ok(())
    }

    /// Executes the named template (for `include`) into a new string, with a fresh variable scope.
    pub fn execute_named(&mut self, name: &str, data: &Value) -> R<String> {
        let t = self.eng.get(name).ok_or_else(|| {
            TemplateError::Plain(format!(
                "template: no template {name:?} associated with template \"gotpl\""
            ))
        })?;
        self.execute_template(t, data)
    }

    /// Executes the template `t` (for `tpl`, whose body need not be the one in the set) into a
    /// new string, with a fresh variable scope.
    pub(crate) fn execute_template(&mut self, t: Rc<Template>, data: &Value) -> R<String> {
        if self.depth >= MAX_DEPTH {
            return Err(TemplateError::Plain(
                "exceeded maximum template depth".into(),
            ));
        }
        let mut sub = Exec {
            eng: self.eng,
            vars: vec![(Rc::from("$"), data.clone(), false)],
            tmpl: t.clone(),
            depth: self.depth + 1,
            nil_iface_dot: false,
        };
        let mut out = String::new();
        sub.run(&t, data, &mut out)?;
        Ok(out)
    }

    fn err(&self, pos: usize, context: &str, message: String) -> TemplateError {
        let src = &self.tmpl.src;
        let pos = pos.min(src.len());
        let before = &src[..pos];
        let line = 1 + before.bytes().filter(|b| *b == b'\n').count();
        let col = match before.rfind('\n') {
            Some(i) => pos - i - 1,
            None => pos,
        };
        TemplateError::Exec {
            frames: vec![Frame {
                location: format!("{}:{}:{}", self.tmpl.parse_name, line, col),
                executing: self.tmpl.name.to_string(),
                context: context.to_string(),
                message,
            }],
        }
    }

    fn src_text(&self, a: usize, b: usize) -> String {
        self.tmpl.src.get(a..b).unwrap_or("").trim().to_string()
    }

    fn walk_list(&mut self, out: &mut String, dot: &Value, nodes: &[Node]) -> R<Flow> {
        for n in nodes {
            match self.walk(out, dot, n)? {
                Flow::Normal => {}
                f => return Ok(f),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, out: &mut String, dot: &Value, node: &Node) -> R<Flow> {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Action(pipe) => {
                let v = self.eval_pipe(dot, pipe)?;
                if pipe.decl.is_empty() {
                    match &v {
                        Value::Nil => out.push_str("<no value>"),
                        Value::Str(s) => out.push_str(s),
                        v => crate::value::write_go(out, v),
                    }
                }
            }
            Node::If(b) => return self.walk_if_with(out, dot, b, false),
            Node::With(b) => return self.walk_if_with(out, dot, b, true),
            Node::Range(b) => return self.walk_range(out, dot, b),
            Node::Template { pos, name, pipe } => {
                let t = self.eng.get(name).ok_or_else(|| {
                    self.err(
                        *pos,
                        &format!("template {name:?}"),
                        format!(
                            "template: no template {name:?} associated with template \"gotpl\""
                        ),
                    )
                })?;
                let newdot = match pipe {
                    Some(p) => self.eval_pipe(dot, p)?,
                    None => Value::Nil,
                };
                if self.depth >= MAX_DEPTH {
                    return Err(self.err(
                        *pos,
                        name,
                        format!("exceeded maximum template depth ({MAX_DEPTH})"),
                    ));
                }
                let mut sub = Exec {
                    eng: self.eng,
                    vars: vec![(Rc::from("$"), newdot.clone(), false)],
                    tmpl: t.clone(),
                    depth: self.depth + 1,
                    nil_iface_dot: false,
                };
                sub.run(&t, &newdot, out)?;
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_if_with(&mut self, out: &mut String, dot: &Value, b: &Branch, with: bool) -> R<Flow> {
        let mark = self.vars.len();
        let v = self.eval_pipe(dot, &b.pipe)?;
        let truth = v.truthy();
        let r = if truth {
            if with {
                self.walk_list(out, &v, &b.list)
            } else {
                self.walk_list(out, dot, &b.list)
            }
        } else if let Some(el) = &b.else_list {
            self.walk_list(out, dot, el)
        } else {
            Ok(Flow::Normal)
        };
        self.vars.truncate(mark);
        r
    }

    fn walk_range(&mut self, out: &mut String, dot: &Value, b: &Branch) -> R<Flow> {
        let mark = self.vars.len();
        let v = self.eval_pipe(dot, &b.pipe)?;
        // eval_pipe pushed declared vars with the whole value; range re-binds them per item.
        self.vars.truncate(mark);
        let decl = &b.pipe.decl;
        let mut items: Vec<(Value, Value)> = Vec::new();
        match v.plain() {
            Value::List(l) => {
                for (i, e) in l.iter().enumerate() {
                    items.push((Value::Int(i as i64), e.clone()));
                }
            }
            Value::Map(m) => {
                for (k, e) in m.borrow().iter() {
                    items.push((Value::from(k.as_str()), e.clone()));
                }
            }
            Value::Int(n) => {
                if decl.len() > 1 {
                    return Err(self.err(
                        b.pos,
                        "range",
                        "can't use int to iterate over more than one variable".into(),
                    ));
                }
                for i in 0..n.max(0) {
                    items.push((Value::Int(i), Value::Int(i)));
                }
            }
            Value::Nil => {}
            other => {
                return Err(self.err(
                    b.pipe.pos,
                    &self.src_text(
                        b.pipe.pos,
                        b.pipe.cmds.last().map(|c| c.end).unwrap_or(b.pipe.pos),
                    ),
                    format!("range can't iterate over {}", other.to_go_string()),
                ));
            }
        }
        if items.is_empty() {
            let r = match &b.else_list {
                Some(el) => self.walk_list(out, dot, el),
                None => Ok(Flow::Normal),
            };
            self.vars.truncate(mark);
            return r.map(|_| Flow::Normal);
        }
        for (k, e) in items {
            let m2 = self.vars.len();
            // Go: a nil element is a nil interface{} (not an invalid value), so `.x` / `$v.x`
            // on it is an error.
            let nil_e = e.is_nil();
            match decl.len() {
                0 => {}
                1 => self.set_or_push(&decl[0], e.clone(), b.pipe.is_assign, nil_e),
                _ => {
                    self.set_or_push(&decl[0], k, b.pipe.is_assign, false);
                    self.set_or_push(&decl[1], e.clone(), b.pipe.is_assign, nil_e);
                }
            }
            let saved = std::mem::replace(&mut self.nil_iface_dot, nil_e);
            let f = self.walk_list(out, &e, &b.list);
            self.nil_iface_dot = saved;
            let f = f?;
            self.vars.truncate(m2);
            match f {
                Flow::Break => break,
                Flow::Continue | Flow::Normal => {}
            }
        }
        self.vars.truncate(mark);
        Ok(Flow::Normal)
    }

    fn set_or_push(&mut self, name: &str, v: Value, assign: bool, nil_iface: bool) {
        if assign && let Some(slot) = self.vars.iter_mut().rev().find(|(n, ..)| &**n == name) {
            slot.1 = v;
            slot.2 = nil_iface;
            return;
        }
        self.vars.push((Rc::from(name), v, nil_iface));
    }

    fn eval_pipe(&mut self, dot: &Value, pipe: &Pipe) -> R<Value> {
        let mut val: Option<Value> = None;
        for cmd in &pipe.cmds {
            val = Some(self.eval_cmd(dot, cmd, val)?);
        }
        let v = val.unwrap_or(Value::Nil);
        for name in &pipe.decl {
            if pipe.is_assign {
                if let Some(slot) = self.vars.iter_mut().rev().find(|(n, ..)| **n == **name) {
                    slot.1 = v.clone();
                    slot.2 = false;
                }
            } else {
                self.vars.push((Rc::from(name.as_str()), v.clone(), false));
            }
        }
        Ok(v)
    }

    /// A variable's value and whether it is a nil interface (see `vars`).
    fn lookup_var_iface(&self, name: &str) -> (Value, bool) {
        self.vars
            .iter()
            .rev()
            .find(|(n, ..)| &**n == name)
            .map(|(_, v, i)| (v.clone(), *i))
            .unwrap_or((Value::Nil, false))
    }

    fn eval_cmd(&mut self, dot: &Value, cmd: &Cmd, fin: Option<Value>) -> R<Value> {
        let first = &cmd.args[0];
        let rest = &cmd.args[1..];
        match first {
            Arg::Field { pos, end, path } => {
                let ctx = self.src_text(*pos, *end);
                let pos = &go_field_pos(*pos, &ctx, false);
                let iface = self.nil_iface_dot;
                self.eval_field_chain(dot, (dot.clone(), iface), path, rest, fin, *pos, &ctx)
            }
            Arg::Var {
                pos,
                end,
                name,
                path,
            } => {
                let v = self.lookup_var_iface(name);
                if path.is_empty() {
                    self.no_args(rest, &fin, *pos, name)?;
                    return Ok(v.0);
                }
                let ctx = self.src_text(*pos, *end);
                let pos = &go_field_pos(*pos, &ctx, true);
                self.eval_field_chain(dot, v, path, rest, fin, *pos, &ctx)
            }
            Arg::Chain {
                pos,
                end,
                node,
                path,
            } => {
                let v = self.eval_arg(dot, node)?;
                let ctx = self.src_text(*pos, *end);
                self.eval_field_chain(dot, (v, false), path, rest, fin, *pos, &ctx)
            }
            Arg::Ident { pos, name } => self.eval_function(dot, name, *pos, rest, fin),
            Arg::Pipe(p) => {
                self.no_args(rest, &fin, p.pos, "pipeline")?;
                let mark = self.vars.len();
                let v = self.eval_pipe(dot, p);
                self.vars.truncate(mark);
                v
            }
            Arg::Nil(p) => Err(self.err(*p, "nil", "nil is not a command".into())),
            other => {
                let pos = other.pos();
                self.no_args(rest, &fin, pos, "")?;
                self.eval_arg(dot, other)
            }
        }
    }

    fn no_args(&self, rest: &[Arg], fin: &Option<Value>, pos: usize, ctx: &str) -> R<()> {
        if !rest.is_empty() || fin.is_some() {
            return Err(self.err(
                pos,
                ctx,
                format!("can't give argument to non-function {ctx}"),
            ));
        }
        Ok(())
    }

    fn eval_arg(&mut self, dot: &Value, a: &Arg) -> R<Value> {
        Ok(match a {
            Arg::Dot(_) => dot.clone(),
            Arg::Nil(_) => Value::Nil,
            Arg::Bool(b) => Value::Bool(*b),
            Arg::Num { int, float, .. } => match (int, float) {
                (Some(i), _) => Value::Int(*i),
                (None, Some(f)) => Value::Float(*f),
                _ => Value::Nil,
            },
            Arg::Str(s) => Value::Str(s.clone()),
            Arg::Field { pos, end, path } => {
                let ctx = self.src_text(*pos, *end);
                let pos = &go_field_pos(*pos, &ctx, false);
                let iface = self.nil_iface_dot;
                self.eval_field_chain(dot, (dot.clone(), iface), path, &[], None, *pos, &ctx)?
            }
            Arg::Var {
                pos,
                end,
                name,
                path,
            } => {
                let v = self.lookup_var_iface(name);
                if path.is_empty() {
                    v.0
                } else {
                    let ctx = self.src_text(*pos, *end);
                    let pos = &go_field_pos(*pos, &ctx, true);
                    self.eval_field_chain(dot, v, path, &[], None, *pos, &ctx)?
                }
            }
            Arg::Chain {
                pos,
                end,
                node,
                path,
            } => {
                let v = self.eval_arg(dot, node)?;
                let ctx = self.src_text(*pos, *end);
                self.eval_field_chain(dot, (v, false), path, &[], None, *pos, &ctx)?
            }
            Arg::Ident { pos, name } => self.eval_function(dot, name, *pos, &[], None)?,
            Arg::Pipe(p) => {
                let mark = self.vars.len();
                let v = self.eval_pipe(dot, p);
                self.vars.truncate(mark);
                v?
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field_chain(
        &mut self,
        dot: &Value,
        (mut recv, nil_iface): (Value, bool),
        path: &[Rc<str>],
        args: &[Arg],
        fin: Option<Value>,
        pos: usize,
        ctx: &str,
    ) -> R<Value> {
        let n = path.len();
        // Go: a nil that starts a chain — dot, a variable, a parenthesized pipeline — is an
        // invalid reflect.Value, and a field of it is again invalid (no error; `(((.Values.
        // global).a).b)` is how charts read optional values). A nil met *inside* the chain (a
        // map's missing key or null value) is a nil interface: a field of that is an error, and
        // so is one of a nil element of a `range` (dot or the element variable).
        let invalid = matches!(recv, Value::Nil) && !nil_iface;
        for (i, name) in path.iter().enumerate() {
            let last = i + 1 == n;
            let has_args = last && (!args.is_empty() || fin.is_some());
            if invalid {
                if self.eng.strict {
                    return Err(self.err(
                        pos,
                        ctx,
                        format!("nil data; no entry for key {:?}", &**name),
                    ));
                }
                continue;
            }
            recv = match &recv {
                Value::Map(m) => {
                    if has_args {
                        return Err(self.err(
                            pos,
                            ctx,
                            format!("{name} is not a method but has arguments"),
                        ));
                    }
                    match m.borrow().get(&**name) {
                        Some(v) => v.clone(),
                        None if self.eng.strict => {
                            return Err(self.err(
                                pos,
                                ctx,
                                format!("map has no entry for key {:?}", &**name),
                            ));
                        }
                        None => Value::Nil,
                    }
                }
                Value::Obj(o) => {
                    if o.has_method(name) {
                        let mut argv = Vec::new();
                        if last {
                            for a in args {
                                argv.push(self.eval_arg(dot, a)?);
                            }
                            if let Some(f) = &fin {
                                argv.push(f.clone());
                            }
                        }
                        match o.call(name, &argv) {
                            Some(Ok(v)) => v,
                            Some(Err(e)) => {
                                return Err(self.err(
                                    pos,
                                    ctx,
                                    format!("error calling {name}: {e}"),
                                ));
                            }
                            None => Value::Nil,
                        }
                    } else if let Some(v) = o.field(name) {
                        if has_args {
                            return Err(self.err(
                                pos,
                                ctx,
                                format!("{name} has arguments but cannot be invoked as function"),
                            ));
                        }
                        v
                    } else {
                        return Err(self.err(
                            pos,
                            ctx,
                            format!("can't evaluate field {name} in type {}", o.type_name()),
                        ));
                    }
                }
                Value::Nil => {
                    return Err(self.err(
                        pos,
                        ctx,
                        format!("nil pointer evaluating interface {{}}.{name}"),
                    ));
                }
                other => {
                    return Err(self.err(
                        pos,
                        ctx,
                        format!("can't evaluate field {name} in type {}", other.type_name()),
                    ));
                }
            };
        }
        Ok(recv)
    }

    fn eval_function(
        &mut self,
        dot: &Value,
        name: &str,
        pos: usize,
        args: &[Arg],
        fin: Option<Value>,
    ) -> R<Value> {
        // short-circuit and/or
        if name == "and" || name == "or" {
            let is_and = name == "and";
            if args.is_empty() && fin.is_none() {
                return Err(self.err(
                    pos,
                    name,
                    format!("wrong number of args for {name}: want at least 1 got 0"),
                ));
            }
            let mut last = Value::Nil;
            for a in args {
                last = self.eval_arg(dot, a)?;
                if last.truthy() != is_and {
                    return Ok(last);
                }
            }
            if let Some(f) = fin {
                last = f;
            }
            return Ok(last);
        }
        let Some(f) = self.eng.funcs.get(name).copied() else {
            return Err(self.err(pos, name, format!("function {name:?} not defined")));
        };
        let mut argv = Vec::with_capacity(args.len() + 1);
        for a in args {
            argv.push(self.eval_arg(dot, a)?);
        }
        if let Some(f) = fin {
            argv.push(f);
        }
        match f(self, &argv) {
            Ok(v) => Ok(v),
            Err(FuncError::Arg(m)) => Err(self.err(pos, name, m)),
            Err(FuncError::Call(m)) => {
                Err(self.err(pos, name, format!("error calling {name}: {m}")))
            }
            Err(FuncError::Nested(prefix, inner)) => {
                let mut e = self.err(pos, name, format!("error calling {name}: {prefix}{inner}"));
                if let (
                    TemplateError::Exec { frames },
                    TemplateError::Exec {
                        frames: inner_frames,
                    },
                ) = (&mut e, *inner)
                {
                    frames.extend(inner_frames);
                }
                Err(e)
            }
        }
    }
}

/// Where Go's parser puts a field or variable chain (and so its errors): a variable with fields
/// (`$v.a.b`) at its first field, a field chain of two or more (`.a.b.c`) at its second.
fn go_field_pos(pos: usize, ctx: &str, var: bool) -> usize {
    let skip = if var { 0 } else { 1 };
    match ctx.get(skip..).and_then(|t| t.find('.')) {
        Some(i) => pos + skip + i,
        None => pos,
    }
}
