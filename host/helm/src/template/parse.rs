//! Parser for Go `text/template`: builds the node tree (actions, pipelines, commands, control
//! structures, `define`/`block`/`template`) with byte positions for error locations.

use std::rc::Rc;

use super::TemplateError;
use super::lex::{Tok, Token, lex};

/// A parsed template body.
#[derive(Debug)]
pub enum Node {
    Text(Rc<str>),
    Action(Pipe),
    If(Branch),
    With(Branch),
    Range(Branch),
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

/// `if`/`with`/`range` parts.
#[derive(Debug)]
pub struct Branch {
    pub pos: usize,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

/// A pipeline with optional variable declarations.
#[derive(Debug)]
pub struct Pipe {
    pub pos: usize,
    pub decl: Vec<String>,
    pub is_assign: bool,
    pub cmds: Vec<Cmd>,
}

/// One command of a pipeline.
#[derive(Debug)]
pub struct Cmd {
    pub end: usize,
    pub args: Vec<Arg>,
}

/// An operand.
#[derive(Debug)]
pub enum Arg {
    Dot(usize),
    Nil(usize),
    Bool(bool),
    Num {
        pos: usize,
        int: Option<i64>,
        float: Option<f64>,
    },
    Str(Rc<str>),
    Field {
        pos: usize,
        end: usize,
        path: Vec<Rc<str>>,
    },
    Var {
        pos: usize,
        end: usize,
        name: Rc<str>,
        path: Vec<Rc<str>>,
    },
    Ident {
        pos: usize,
        name: Rc<str>,
    },
    Chain {
        pos: usize,
        end: usize,
        node: Box<Arg>,
        path: Vec<Rc<str>>,
    },
    Pipe(Box<Pipe>),
}

impl Arg {
    /// Byte position of the operand.
    pub fn pos(&self) -> usize {
        match self {
            Arg::Dot(p) | Arg::Nil(p) => *p,
            Arg::Num { pos, .. }
            | Arg::Field { pos, .. }
            | Arg::Var { pos, .. }
            | Arg::Ident { pos, .. }
            | Arg::Chain { pos, .. } => *pos,
            Arg::Pipe(p) => p.pos,
            Arg::Bool(_) | Arg::Str(_) => 0,
        }
    }
}

/// Result of parsing one source: its body and the `define`d templates.
pub struct ParseOutput {
    pub body: Vec<Node>,
    pub defines: Vec<(String, Vec<Node>)>,
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    i: usize,
    defines: Vec<(String, Vec<Node>)>,
    vars: Vec<Vec<String>>,
}

enum End {
    Closed,
    Else(usize),
    Eof,
}

/// Parses template source.
pub fn parse(src: &str) -> Result<ParseOutput, TemplateError> {
    let toks = lex(src)?;
    let mut p = Parser {
        src,
        toks,
        i: 0,
        defines: Vec::new(),
        vars: vec![vec!["$".into()]],
    };
    let (body, end) = p.list()?;
    match end {
        End::Eof => {}
        End::Closed => return Err(p.err_at(p.prev_pos(), "unexpected {{end}}")),
        End::Else(pos) => return Err(p.err_at(pos, "unexpected {{else}}")),
    }
    Ok(ParseOutput {
        body,
        defines: p.defines,
    })
}

impl<'a> Parser<'a> {
    fn err_at(&self, pos: usize, msg: &str) -> TemplateError {
        TemplateError::parse(self.src, pos, msg)
    }
    fn peek(&self) -> &Token {
        &self.toks[self.i]
    }
    fn next(&mut self) -> Token {
        let t = self.toks[self.i].clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }
    fn prev_pos(&self) -> usize {
        self.toks[self.i.saturating_sub(1)].pos
    }
    fn expect_close(&mut self, ctx: &str) -> Result<(), TemplateError> {
        let t = self.next();
        if t.tok != Tok::Close {
            return Err(self.err_at(t.pos, &format!("unexpected {} in {ctx}", desc(&t.tok))));
        }
        Ok(())
    }

    fn list(&mut self) -> Result<(Vec<Node>, End), TemplateError> {
        let mut nodes = Vec::new();
        loop {
            let t = self.next();
            match t.tok {
                Tok::Eof => return Ok((nodes, End::Eof)),
                Tok::Text(s) => nodes.push(Node::Text(Rc::from(s))),
                Tok::Open => {
                    let kw = self.peek().clone();
                    if let Tok::Ident(name) = &kw.tok {
                        match name.as_str() {
                            "end" => {
                                self.next();
                                self.expect_close("end")?;
                                return Ok((nodes, End::Closed));
                            }
                            "else" => {
                                self.next();
                                return Ok((nodes, End::Else(kw.pos)));
                            }
                            "if" | "with" | "range" => {
                                self.next();
                                let n = self.branch(name.clone(), kw.pos)?;
                                nodes.push(n);
                                continue;
                            }
                            "define" => {
                                self.next();
                                self.define()?;
                                continue;
                            }
                            "block" => {
                                self.next();
                                let n = self.block(kw.pos)?;
                                nodes.push(n);
                                continue;
                            }
                            "template" => {
                                self.next();
                                let n = self.template_call(kw.pos)?;
                                nodes.push(n);
                                continue;
                            }
                            "break" | "continue" => {
                                self.next();
                                self.expect_close(name)?;
                                nodes.push(if name == "break" {
                                    Node::Break
                                } else {
                                    Node::Continue
                                });
                                continue;
                            }
                            _ => {}
                        }
                    }
                    let pipe = self.pipeline("command", true)?;
                    nodes.push(Node::Action(pipe));
                }
                other => return Err(self.err_at(t.pos, &format!("unexpected {}", desc(&other)))),
            }
        }
    }

    fn template_name(&mut self, ctx: &str) -> Result<String, TemplateError> {
        let t = self.next();
        match t.tok {
            Tok::Str(s) => Ok(s),
            other => Err(self.err_at(
                t.pos,
                &format!("unexpected {} in {ctx} clause", desc(&other)),
            )),
        }
    }

    fn template_call(&mut self, pos: usize) -> Result<Node, TemplateError> {
        let name = self.template_name("template")?;
        let pipe = if self.peek().tok == Tok::Close {
            self.next();
            None
        } else {
            Some(self.pipeline("template clause", false)?)
        };
        Ok(Node::Template { pos, name, pipe })
    }

    fn define(&mut self) -> Result<(), TemplateError> {
        let name = self.template_name("define")?;
        self.expect_close("define clause")?;
        self.vars.push(vec!["$".into()]);
        let (body, end) = self.list()?;
        self.vars.pop();
        match end {
            End::Closed => {}
            _ => return Err(self.err_at(self.prev_pos(), "unexpected EOF")),
        }
        self.defines.push((name, body));
        Ok(())
    }

    fn block(&mut self, pos: usize) -> Result<Node, TemplateError> {
        let name = self.template_name("block")?;
        let pipe = self.pipeline("block clause", false)?;
        self.vars.push(vec!["$".into()]);
        let (body, end) = self.list()?;
        self.vars.pop();
        match end {
            End::Closed => {}
            _ => return Err(self.err_at(self.prev_pos(), "unexpected EOF")),
        }
        self.defines.push((name.clone(), body));
        Ok(Node::Template {
            pos,
            name,
            pipe: Some(pipe),
        })
    }

    fn branch(&mut self, kind: String, pos: usize) -> Result<Node, TemplateError> {
        self.vars.push(Vec::new());
        let pipe = self.pipeline(&kind, false)?;
        let (list, end) = self.list()?;
        let else_list = match end {
            End::Closed => None,
            End::Eof => return Err(self.err_at(self.prev_pos(), "unexpected EOF")),
            End::Else(epos) => {
                // "else if" / "else with" chains
                let t = self.peek().clone();
                let chained = match &t.tok {
                    Tok::Ident(n)
                        if (n == "if" && kind == "if") || (n == "with" && kind == "with") =>
                    {
                        Some(n.clone())
                    }
                    _ => None,
                };
                if let Some(k) = chained {
                    self.next();
                    // the chained branch consumes the final {{end}}
                    self.vars.pop();
                    self.vars.push(Vec::new());
                    let inner = self.branch(k, t.pos)?;
                    self.vars.pop();
                    let node = match kind.as_str() {
                        "if" => Node::If(Branch {
                            pos,
                            pipe,
                            list,
                            else_list: Some(vec![inner]),
                        }),
                        _ => Node::With(Branch {
                            pos,
                            pipe,
                            list,
                            else_list: Some(vec![inner]),
                        }),
                    };
                    return Ok(node);
                }
                self.expect_close("else")?;
                let _ = epos;
                let (el, end2) = self.list()?;
                match end2 {
                    End::Closed => {}
                    End::Else(p) => return Err(self.err_at(p, "expected end; found {{else}}")),
                    End::Eof => return Err(self.err_at(self.prev_pos(), "unexpected EOF")),
                }
                Some(el)
            }
        };
        self.vars.pop();
        let b = Branch {
            pos,
            pipe,
            list,
            else_list,
        };
        Ok(match kind.as_str() {
            "if" => Node::If(b),
            "with" => Node::With(b),
            _ => Node::Range(b),
        })
    }

    fn var_known(&self, name: &str) -> bool {
        self.vars.iter().any(|s| s.iter().any(|v| v == name))
    }

    /// Parses a pipeline up to `}}` (or `)` when `paren`).
    fn pipeline_inner(
        &mut self,
        ctx: &str,
        allow_decl: bool,
        paren: bool,
    ) -> Result<Pipe, TemplateError> {
        let pos = self.peek().pos;
        let mut decl = Vec::new();
        let mut is_assign = false;
        // declarations: $x := / $x = / $i, $e :=
        if allow_decl && matches!(self.peek().tok, Tok::Var(_)) {
            let save = self.i;
            let mut names = Vec::new();
            if let Tok::Var(v) = self.next().tok {
                names.push(v);
            }
            let t = self.peek().tok.clone();
            match t {
                Tok::Declare | Tok::Assign => {
                    self.next();
                    is_assign = t == Tok::Assign;
                    decl = names;
                }
                Tok::Comma if ctx == "range" => {
                    self.next();
                    if let Tok::Var(v2) = self.next().tok {
                        names.push(v2);
                        let t2 = self.next().tok;
                        if t2 == Tok::Declare || t2 == Tok::Assign {
                            is_assign = t2 == Tok::Assign;
                            decl = names;
                        } else {
                            return Err(self.err_at(pos, "range can only initialize variables"));
                        }
                    } else {
                        return Err(self.err_at(pos, "range can only initialize variables"));
                    }
                }
                _ => self.i = save,
            }
            if !decl.is_empty() {
                if is_assign {
                    for d in &decl {
                        if !self.var_known(d) {
                            return Err(self.err_at(pos, &format!("undefined variable \"{d}\"")));
                        }
                    }
                } else if let Some(scope) = self.vars.last_mut() {
                    scope.extend(decl.iter().cloned());
                }
            }
        }
        let mut cmds = Vec::new();
        loop {
            let t = self.peek().clone();
            match t.tok {
                Tok::Close if !paren => {
                    self.next();
                    break;
                }
                Tok::RParen if paren => {
                    self.next();
                    break;
                }
                Tok::Eof => return Err(self.err_at(t.pos, &format!("unclosed action in {ctx}"))),
                _ => {}
            }
            let cmd = self.command(paren)?;
            cmds.push(cmd);
            let t = self.peek().clone();
            match t.tok {
                Tok::Pipe => {
                    self.next();
                }
                Tok::Close if !paren => {}
                Tok::RParen if paren => {}
                other => {
                    return Err(
                        self.err_at(t.pos, &format!("unexpected {} in operand", desc(&other)))
                    );
                }
            }
        }
        if cmds.is_empty() {
            return Err(self.err_at(pos, &format!("missing value for {ctx}")));
        }
        Ok(Pipe {
            pos,
            decl,
            is_assign,
            cmds,
        })
    }

    fn pipeline(&mut self, ctx: &str, allow_decl: bool) -> Result<Pipe, TemplateError> {
        let allow = allow_decl || matches!(ctx, "if" | "with" | "range");
        self.pipeline_inner(ctx, allow, false)
    }

    fn command(&mut self, paren: bool) -> Result<Cmd, TemplateError> {
        let pos = self.peek().pos;
        let mut args = Vec::new();
        let mut end = pos;
        loop {
            let t = self.peek().clone();
            match t.tok {
                Tok::Pipe | Tok::Close | Tok::Eof => break,
                Tok::RParen if paren => break,
                _ => {}
            }
            if !args.is_empty() && !t.space_before {
                return Err(self.err_at(t.pos, &format!("unexpected {} in operand", desc(&t.tok))));
            }
            let a = self.operand()?;
            end = self.toks[self.i.saturating_sub(1)].end;
            args.push(a);
        }
        if args.is_empty() {
            return Err(self.err_at(pos, "empty command"));
        }
        Ok(Cmd { end, args })
    }

    fn fields(&mut self) -> Vec<Rc<str>> {
        let mut path = Vec::new();
        while let Tok::Field(f) = &self.peek().tok {
            if self.peek().space_before {
                break;
            }
            path.push(Rc::from(f.as_str()));
            self.next();
        }
        path
    }

    fn operand(&mut self) -> Result<Arg, TemplateError> {
        let t = self.next();
        let pos = t.pos;
        let arg = match t.tok {
            Tok::Dot => Arg::Dot(pos),
            Tok::Field(f) => {
                let mut path = vec![Rc::from(f.as_str())];
                path.extend(self.fields());
                let end = self.toks[self.i - 1].end;
                return Ok(Arg::Field { pos, end, path });
            }
            Tok::Var(v) => {
                if !self.var_known(&v) {
                    return Err(self.err_at(pos, &format!("undefined variable \"{v}\"")));
                }
                let path = self.fields();
                let end = self.toks[self.i - 1].end;
                return Ok(Arg::Var {
                    pos,
                    end,
                    name: Rc::from(v.as_str()),
                    path,
                });
            }
            Tok::Str(s) => Arg::Str(Rc::from(s)),
            Tok::Char(c) => Arg::Num {
                pos,
                int: Some(c),
                float: Some(c as f64),
            },
            Tok::Number(n) => parse_number(&n)
                .ok_or_else(|| self.err_at(pos, &format!("illegal number syntax: {n:?}")))?(
                pos
            ),
            Tok::LParen => {
                let p = self.pipeline_inner("parenthesized pipeline", false, true)?;
                Arg::Pipe(Box::new(p))
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => Arg::Bool(true),
                "false" => Arg::Bool(false),
                "nil" => Arg::Nil(pos),
                "end" | "else" | "if" | "range" | "with" | "define" | "template" | "block"
                | "break" | "continue" => {
                    return Err(self.err_at(pos, &format!("unexpected <{name}> in command")));
                }
                _ => Arg::Ident {
                    pos,
                    name: Rc::from(name.as_str()),
                },
            },
            other => {
                return Err(self.err_at(pos, &format!("unexpected {} in operand", desc(&other))));
            }
        };
        // chained fields: (x).a.b, or func.a
        if matches!(self.peek().tok, Tok::Field(_)) && !self.peek().space_before {
            let path = self.fields();
            let end = self.toks[self.i - 1].end;
            return Ok(Arg::Chain {
                pos,
                end,
                node: Box::new(arg),
                path,
            });
        }
        Ok(arg)
    }
}

type NumCtor = Box<dyn FnOnce(usize) -> Arg>;

fn parse_number(text: &str) -> Option<NumCtor> {
    let clean: String = text.replace('_', "");
    let (neg, body) = match clean.strip_prefix('-') {
        Some(r) => (true, r.to_string()),
        None => (false, clean.trim_start_matches('+').to_string()),
    };
    let lower = body.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|c| c.is_ascii_digit())
    {
        i64::from_str_radix(&lower[1..], 8).ok()
    } else {
        lower.parse::<i64>().ok()
    };
    let int = int.map(|i| if neg { -i } else { i });
    let is_hex = lower.starts_with("0x");
    let float = if is_hex {
        int.map(|i| i as f64)
    } else {
        clean.parse::<f64>().ok()
    };
    if int.is_none() && float.is_none() {
        return None;
    }
    // Go: an integral float literal like 1e3 is also an int, but stays a float when used
    // as interface{} (it contains '.', 'e' or 'p').
    let int = int.or_else(|| {
        float.and_then(|f| {
            if f.fract() == 0.0 && f.abs() < 9.2e18 {
                Some(f as i64)
            } else {
                None
            }
        })
    });
    let is_float_text = !is_hex && lower.contains(['.', 'e', 'p']);
    Some(Box::new(move |pos| Arg::Num {
        pos,
        int: if is_float_text { None } else { int },
        float,
    }))
}

fn desc(t: &Tok) -> String {
    match t {
        Tok::Close => "\"}}\"".into(),
        Tok::Open => "\"{{\"".into(),
        Tok::RParen => "\")\"".into(),
        Tok::LParen => "\"(\"".into(),
        Tok::Eof => "EOF".into(),
        Tok::Ident(s) => format!("<{s}>"),
        Tok::Number(s) => format!("number {s:?}"),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Field(s) => format!("<.{s}>"),
        Tok::Var(s) => format!("<{s}>"),
        other => format!("{other:?}"),
    }
}
