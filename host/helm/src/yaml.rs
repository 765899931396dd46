//! YAML compatibility with Helm's stack (sigs.k8s.io/yaml on go-yaml v2, YAML 1.1):
//!
//! * [`parse`] reads YAML as `sigs.k8s.io/yaml.Unmarshal` into `interface{}` does: YAML 1.1
//!   scalar resolution (`yes`/`on` are bools, `0755` is octal), merge keys, and then the JSON
//!   round trip, so every number becomes a float64 and keys become strings. Errors carry go-yaml's
//!   text (`yaml: line 11: could not find expected ':'`).
//! * [`to_yaml`] is `toYaml`: JSON normalisation, then go-yaml v2's encoder (natural key order,
//!   quoting of strings that would resolve to other types, `|-` literals, 80-column folding). The
//!   emitter is libyaml's (via `unsafe-libyaml`), which go-yaml's encoder is a port of.

use std::collections::HashMap;
use std::ffi::CStr;
use std::mem::MaybeUninit;

use crate::strconv::format_float_v;
use crate::value::{Map, Value};

/// A YAML error with go-yaml's message text.
#[derive(Debug, Clone)]
pub struct YamlError(pub String);

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone)]
enum Node {
    Scalar {
        value: String,
        plain: bool,
        tag: Option<String>,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Null,
}

struct Parser {
    p: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    _input: Vec<u8>,
}

impl Parser {
    fn new(src: &[u8]) -> Parser {
        let input = src.to_vec();
        let mut p = Box::new(MaybeUninit::<unsafe_libyaml::yaml_parser_t>::uninit());
        unsafe {
            let pp = p.as_mut_ptr();
            let _ = unsafe_libyaml::yaml_parser_initialize(pp);
            unsafe_libyaml::yaml_parser_set_input_string(pp, input.as_ptr(), input.len() as _);
        }
        Parser { p, _input: input }
    }

    fn next(&mut self) -> Result<Event, YamlError> {
        unsafe {
            let pp = self.p.as_mut_ptr();
            let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
            if unsafe_libyaml::yaml_parser_parse(pp, ev.as_mut_ptr()).fail {
                return Err(self.error());
            }
            let ev = ev.assume_init_mut();
            let cstr = |p: *mut u8| -> Option<String> {
                if p.is_null() {
                    None
                } else {
                    Some(CStr::from_ptr(p as *const _).to_string_lossy().into_owned())
                }
            };
            let out = match ev.type_ {
                unsafe_libyaml::YAML_STREAM_START_EVENT => Event::Other,
                unsafe_libyaml::YAML_STREAM_END_EVENT => Event::StreamEnd,
                unsafe_libyaml::YAML_DOCUMENT_START_EVENT => Event::DocStart,
                unsafe_libyaml::YAML_DOCUMENT_END_EVENT => Event::DocEnd,
                unsafe_libyaml::YAML_ALIAS_EVENT => {
                    Event::Alias(cstr(ev.data.alias.anchor).unwrap_or_default())
                }
                unsafe_libyaml::YAML_SCALAR_EVENT => {
                    let s = ev.data.scalar;
                    let bytes = std::slice::from_raw_parts(s.value, s.length as usize);
                    Event::Scalar {
                        anchor: cstr(s.anchor),
                        tag: cstr(s.tag),
                        value: String::from_utf8_lossy(bytes).into_owned(),
                        plain: s.style == unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE,
                    }
                }
                unsafe_libyaml::YAML_SEQUENCE_START_EVENT => {
                    Event::SeqStart(cstr(ev.data.sequence_start.anchor))
                }
                unsafe_libyaml::YAML_SEQUENCE_END_EVENT => Event::SeqEnd,
                unsafe_libyaml::YAML_MAPPING_START_EVENT => {
                    Event::MapStart(cstr(ev.data.mapping_start.anchor))
                }
                unsafe_libyaml::YAML_MAPPING_END_EVENT => Event::MapEnd,
                _ => Event::Other,
            };
            unsafe_libyaml::yaml_event_delete(ev);
            Ok(out)
        }
    }

    fn error(&self) -> YamlError {
        unsafe {
            let p = &*self.p.as_ptr();
            let line = if p.problem_mark.line != 0 {
                let mut l = p.problem_mark.line as usize;
                if p.error == unsafe_libyaml::YAML_SCANNER_ERROR {
                    l += 1;
                }
                l
            } else {
                p.context_mark.line as usize
            };
            let msg = if p.problem.is_null() {
                "unknown problem parsing YAML content".to_string()
            } else {
                CStr::from_ptr(p.problem.cast())
                    .to_string_lossy()
                    .into_owned()
            };
            if line != 0 {
                YamlError(format!("yaml: line {line}: {msg}"))
            } else {
                YamlError(format!("yaml: {msg}"))
            }
        }
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        unsafe { unsafe_libyaml::yaml_parser_delete(self.p.as_mut_ptr()) }
    }
}

enum Event {
    StreamEnd,
    DocStart,
    DocEnd,
    Alias(String),
    Scalar {
        anchor: Option<String>,
        tag: Option<String>,
        value: String,
        plain: bool,
    },
    SeqStart(Option<String>),
    SeqEnd,
    MapStart(Option<String>),
    MapEnd,
    Other,
}

struct Builder {
    parser: Parser,
    anchors: HashMap<String, Node>,
}

impl Builder {
    fn node(&mut self, ev: Event) -> Result<Node, YamlError> {
        match ev {
            Event::Scalar {
                anchor,
                tag,
                value,
                plain,
            } => {
                let n = Node::Scalar { value, plain, tag };
                if let Some(a) = anchor {
                    self.anchors.insert(a, n.clone());
                }
                Ok(n)
            }
            Event::Alias(a) => self
                .anchors
                .get(&a)
                .cloned()
                .ok_or_else(|| YamlError(format!("yaml: unknown anchor '{a}' referenced"))),
            Event::SeqStart(anchor) => {
                let mut items = Vec::new();
                loop {
                    let ev = self.parser.next()?;
                    if matches!(ev, Event::SeqEnd) {
                        break;
                    }
                    items.push(self.node(ev)?);
                }
                let n = Node::Seq(items);
                if let Some(a) = anchor {
                    self.anchors.insert(a, n.clone());
                }
                Ok(n)
            }
            Event::MapStart(anchor) => {
                let mut items = Vec::new();
                loop {
                    let ev = self.parser.next()?;
                    if matches!(ev, Event::MapEnd) {
                        break;
                    }
                    let k = self.node(ev)?;
                    let ev = self.parser.next()?;
                    let v = self.node(ev)?;
                    items.push((k, v));
                }
                let n = Node::Map(items);
                if let Some(a) = anchor {
                    self.anchors.insert(a, n.clone());
                }
                Ok(n)
            }
            _ => Ok(Node::Null),
        }
    }

    /// Reads the next document; `None` at the end of the stream.
    fn document(&mut self) -> Result<Option<Node>, YamlError> {
        loop {
            match self.parser.next()? {
                Event::StreamEnd => return Ok(None),
                Event::DocStart => break,
                _ => {}
            }
        }
        let ev = self.parser.next()?;
        let n = if matches!(ev, Event::DocEnd) {
            return Ok(Some(Node::Null));
        } else {
            self.node(ev)?
        };
        match self.parser.next()? {
            Event::DocEnd => {}
            _ => {
                return Err(YamlError(
                    "yaml: did not find expected <document end>".into(),
                ));
            }
        }
        Ok(Some(n))
    }
}

/// A resolved YAML 1.1 scalar (go-yaml v2 `resolve`).
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str,
    Timestamp,
}

fn is_yaml_float(s: &str) -> bool {
    // ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - s
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let i = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if i != 4 || i == b.len() || b[i] != b'-' {
        return false;
    }
    // date: YYYY-M-D, optionally followed by time
    let (date, rest) = match s.find(['T', 't', ' ']) {
        Some(p) => (&s[..p], Some(&s[p + 1..])),
        None => (s, None),
    };
    let parts: Vec<&str> = date.split('-').collect();
    if parts.len() != 3
        || !parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|c| c.is_ascii_digit()))
    {
        return false;
    }
    if parts[1].len() > 2 || parts[2].len() > 2 {
        return false;
    }
    match rest {
        None => true,
        Some(t) => {
            let t = t.trim_end_matches('Z');
            let hms: Vec<&str> = t.splitn(3, ':').collect();
            hms.len() == 3
                && hms[0].bytes().all(|c| c.is_ascii_digit())
                && hms[1].bytes().all(|c| c.is_ascii_digit())
        }
    }
}

fn parse_go_int(plain: &str) -> Option<i64> {
    crate::strconv::parse_int_base0(plain)
}

/// go-yaml v2 `resolve("", s)` for a plain scalar.
pub fn resolve(s: &str) -> Scalar {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Scalar::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Scalar::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        "<<" => return Scalar::Str,
        _ => {}
    }
    let c = s.as_bytes()[0];
    match c {
        b'.' => {
            if let Ok(f) = s.parse::<f64>()
                && is_yaml_float(s)
            {
                return Scalar::Float(f);
            }
            Scalar::Str
        }
        b'0'..=b'9' | b'+' | b'-' => {
            if c.is_ascii_digit() && is_timestamp(s) {
                return Scalar::Timestamp;
            }
            let plain = s.replace('_', "");
            if let Some(i) = parse_go_int(&plain) {
                return Scalar::Int(i);
            }
            if let Some(rest) = plain
                .strip_prefix("0x")
                .or_else(|| plain.strip_prefix("+0x"))
                && u64::from_str_radix(rest, 16).is_ok()
            {
                return Scalar::Float(u64::from_str_radix(rest, 16).unwrap() as f64);
            }
            if plain.bytes().all(|c| c.is_ascii_digit()) && plain.parse::<u64>().is_ok() {
                return Scalar::Float(plain.parse::<u64>().unwrap() as f64);
            }
            if is_yaml_float(&plain)
                && let Ok(f) = plain.parse::<f64>()
            {
                return Scalar::Float(f);
            }
            if let Some(b) = plain.strip_prefix("0b")
                && let Ok(i) = i64::from_str_radix(b, 2)
            {
                return Scalar::Int(i);
            }
            if let Some(b) = plain.strip_prefix("-0b")
                && let Ok(i) = i64::from_str_radix(b, 2)
            {
                return Scalar::Int(-i);
            }
            Scalar::Str
        }
        _ => Scalar::Str,
    }
}

fn scalar_to_value(value: &str, plain: bool, tag: Option<&str>) -> Value {
    let tag = tag.map(|t| {
        t.strip_prefix("tag:yaml.org,2002:")
            .map(|x| format!("!!{x}"))
            .unwrap_or(t.to_string())
    });
    match tag.as_deref() {
        Some("!!str") | Some("!!binary") => return Value::from(value),
        Some("!!int") | Some("!!float") => {
            return match resolve(value) {
                Scalar::Int(i) => Value::Float(i as f64),
                Scalar::Float(f) => Value::Float(f),
                _ => Value::from(value),
            };
        }
        Some("!!bool") | Some("!!null") | None => {}
        Some(t) if t.starts_with('!') && !t.starts_with("!!") => {}
        _ => {}
    }
    if !plain && tag.is_none() {
        return Value::from(value);
    }
    match resolve(value) {
        Scalar::Null => Value::Nil,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::Float(i as f64),
        Scalar::Float(f) => Value::Float(f),
        Scalar::Str | Scalar::Timestamp => Value::from(value),
    }
}

fn key_string(n: &Node) -> Result<String, YamlError> {
    Ok(match n {
        Node::Scalar { value, plain, tag } => {
            match scalar_to_value(value, *plain, tag.as_deref()) {
                Value::Str(s) => s.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Float(f) => {
                    if f.fract() == 0.0
                        && f.abs() < 1e19
                        && *plain
                        && !value.contains(['.', 'e', 'E'])
                    {
                        format!("{}", f as i64)
                    } else {
                        format_float_v(f)
                    }
                }
                Value::Nil => "null".into(),
                other => other.to_go_string(),
            }
        }
        Node::Null => "null".into(),
        _ => {
            return Err(YamlError(
                "error converting YAML to JSON: yaml: invalid map key".into(),
            ));
        }
    })
}

fn to_value(n: &Node) -> Result<Value, YamlError> {
    Ok(match n {
        Node::Null => Value::Nil,
        Node::Scalar { value, plain, tag } => scalar_to_value(value, *plain, tag.as_deref()),
        Node::Seq(items) => Value::from(items.iter().map(to_value).collect::<Result<Vec<_>, _>>()?),
        Node::Map(items) => {
            let mut m = Map::new();
            // merge keys first (explicit keys win)
            for (k, v) in items {
                if let Node::Scalar {
                    value, plain: true, ..
                } = k
                    && value == "<<"
                {
                    let merge_one = |m: &mut Map, v: &Node| -> Result<(), YamlError> {
                        if let Value::Map(src) = to_value(v)? {
                            for (k, v) in src.borrow().iter() {
                                m.entry(k.clone()).or_insert_with(|| v.clone());
                            }
                        }
                        Ok(())
                    };
                    match v {
                        Node::Seq(list) => {
                            for x in list {
                                merge_one(&mut m, x)?;
                            }
                        }
                        other => merge_one(&mut m, other)?,
                    }
                }
            }
            for (k, v) in items {
                if let Node::Scalar {
                    value, plain: true, ..
                } = k
                    && value == "<<"
                {
                    continue;
                }
                m.insert(key_string(k)?, to_value(v)?);
            }
            Value::from(m)
        }
    })
}

/// `sigs.k8s.io/yaml.Unmarshal` of the first document into `interface{}`.
pub fn parse(src: &str) -> Result<Value, YamlError> {
    let mut b = Builder {
        parser: Parser::new(src.as_bytes()),
        anchors: HashMap::new(),
    };
    let doc = b
        .document()
        .map_err(|e| YamlError(format!("error converting YAML to JSON: {}", e.0)))?;
    match doc {
        None => Ok(Value::Nil),
        Some(n) => to_value(&n).map_err(|e| {
            if e.0.starts_with("error converting") {
                e
            } else {
                YamlError(format!("error converting YAML to JSON: {}", e.0))
            }
        }),
    }
}

/// Parses every document of a stream (for `fromYamlArray`-like uses and validation).
pub fn parse_all(src: &str) -> Result<Vec<Value>, YamlError> {
    let mut b = Builder {
        parser: Parser::new(src.as_bytes()),
        anchors: HashMap::new(),
    };
    let mut out = Vec::new();
    while let Some(n) = b.document()? {
        out.push(to_value(&n)?);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// go-yaml v2's `keyList.Less` for string keys ("natural" order).
pub fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i as isize - 1;
            while j >= 0 && ar[j as usize].is_ascii_digit() {
                if ar[j as usize] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
                j -= 1;
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an.wrapping_mul(10).wrapping_add(ar[ai] as i64 - '0' as i64);
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn.wrapping_mul(10).wrapping_add(br[bi] as i64 - '0' as i64);
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

fn is_base60_float(s: &str) -> bool {
    // ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
    if s.is_empty() || !s.contains(':') {
        return false;
    }
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (main, frac) = match s.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    if let Some(f) = frac
        && !f.bytes().all(|c| c.is_ascii_digit() || c == b'_')
    {
        return false;
    }
    let mut parts = main.split(':');
    let first = parts.next().unwrap_or("");
    if first.is_empty()
        || !first.as_bytes()[0].is_ascii_digit()
        || !first.bytes().all(|c| c.is_ascii_digit() || c == b'_')
    {
        return false;
    }
    let mut n = 0;
    for p in parts {
        n += 1;
        let b = p.as_bytes();
        let ok = match b.len() {
            1 => b[0].is_ascii_digit(),
            2 => (b'0'..=b'5').contains(&b[0]) && b[1].is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    n > 0
}

struct Emitter {
    e: Box<MaybeUninit<unsafe_libyaml::yaml_emitter_t>>,
    // boxed: libyaml's write handler keeps a raw pointer to this Vec
    #[allow(clippy::box_collection)]
    out: Box<Vec<u8>>,
    ok: bool,
}

unsafe fn write_handler(data: *mut std::ffi::c_void, buffer: *mut u8, size: u64) -> i32 {
    unsafe {
        let out = &mut *(data as *mut Vec<u8>);
        out.extend_from_slice(std::slice::from_raw_parts(buffer, size as usize));
    }
    1
}

impl Emitter {
    fn new() -> Emitter {
        let mut e = Box::new(MaybeUninit::<unsafe_libyaml::yaml_emitter_t>::uninit());
        let mut out: Box<Vec<u8>> = Box::default();
        unsafe {
            let ep = e.as_mut_ptr();
            let _ = unsafe_libyaml::yaml_emitter_initialize(ep);
            unsafe_libyaml::yaml_emitter_set_unicode(ep, true);
            unsafe_libyaml::yaml_emitter_set_output(
                ep,
                write_handler,
                &mut *out as *mut Vec<u8> as *mut _,
            );
        }
        Emitter { e, out, ok: true }
    }

    fn emit(&mut self, mut ev: MaybeUninit<unsafe_libyaml::yaml_event_t>) {
        unsafe {
            if self.ok
                && unsafe_libyaml::yaml_emitter_emit(self.e.as_mut_ptr(), ev.as_mut_ptr()).fail
            {
                self.ok = false;
            }
        }
    }

    fn scalar(&mut self, s: &str, style: unsafe_libyaml::yaml_scalar_style_t) {
        let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        unsafe {
            let _ = unsafe_libyaml::yaml_scalar_event_initialize(
                ev.as_mut_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                s.as_ptr(),
                s.len() as i32,
                true,
                true,
                style,
            );
        }
        self.emit(ev);
    }

    fn string(&mut self, s: &str) {
        let can_plain = !s.is_empty() && resolve(s) == Scalar::Str && !is_base60_float(s);
        let style = if s.contains('\n') {
            unsafe_libyaml::YAML_LITERAL_SCALAR_STYLE
        } else if can_plain {
            unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE
        } else {
            unsafe_libyaml::YAML_DOUBLE_QUOTED_SCALAR_STYLE
        };
        self.scalar(s, style);
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Nil => self.scalar("null", unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE),
            Value::Bool(b) => self.scalar(
                if *b { "true" } else { "false" },
                unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE,
            ),
            Value::Int(i) => self.scalar(&i.to_string(), unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE),
            Value::Float(f) => {
                let s = match format_float_v(*f).as_str() {
                    "+Inf" => ".inf".to_string(),
                    "-Inf" => "-.inf".to_string(),
                    "NaN" => ".nan".to_string(),
                    s => s.to_string(),
                };
                self.scalar(&s, unsafe_libyaml::YAML_PLAIN_SCALAR_STYLE)
            }
            Value::Str(s) => self.string(s),
            Value::List(l) => {
                let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
                unsafe {
                    let _ = unsafe_libyaml::yaml_sequence_start_event_initialize(
                        ev.as_mut_ptr(),
                        std::ptr::null(),
                        std::ptr::null(),
                        true,
                        unsafe_libyaml::YAML_BLOCK_SEQUENCE_STYLE,
                    );
                }
                self.emit(ev);
                for e in l.iter() {
                    self.value(e);
                }
                let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
                unsafe {
                    let _ = unsafe_libyaml::yaml_sequence_end_event_initialize(ev.as_mut_ptr());
                }
                self.emit(ev);
            }
            Value::Map(m) => {
                let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
                unsafe {
                    let _ = unsafe_libyaml::yaml_mapping_start_event_initialize(
                        ev.as_mut_ptr(),
                        std::ptr::null(),
                        std::ptr::null(),
                        true,
                        unsafe_libyaml::YAML_BLOCK_MAPPING_STYLE,
                    );
                }
                self.emit(ev);
                let m = m.borrow();
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by(|a, b| {
                    if key_less(a, b) {
                        std::cmp::Ordering::Less
                    } else if key_less(b, a) {
                        std::cmp::Ordering::Greater
                    } else {
                        std::cmp::Ordering::Equal
                    }
                });
                for k in keys {
                    self.string(k);
                    self.value(&m[k]);
                }
                let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
                unsafe {
                    let _ = unsafe_libyaml::yaml_mapping_end_event_initialize(ev.as_mut_ptr());
                }
                self.emit(ev);
            }
            Value::Obj(o) => self.value(&o.to_value()),
        }
    }

    fn document(mut self, v: &Value) -> Option<String> {
        unsafe {
            let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
            let _ = unsafe_libyaml::yaml_stream_start_event_initialize(
                ev.as_mut_ptr(),
                unsafe_libyaml::YAML_UTF8_ENCODING,
            );
            self.emit(ev);
            let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
            let _ = unsafe_libyaml::yaml_document_start_event_initialize(
                ev.as_mut_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                true,
            );
            self.emit(ev);
        }
        self.value(v);
        unsafe {
            let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
            let _ = unsafe_libyaml::yaml_document_end_event_initialize(ev.as_mut_ptr(), true);
            self.emit(ev);
            let mut ev = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
            let _ = unsafe_libyaml::yaml_stream_end_event_initialize(ev.as_mut_ptr());
            self.emit(ev);
            let _ = unsafe_libyaml::yaml_emitter_flush(self.e.as_mut_ptr());
        }
        if !self.ok {
            return None;
        }
        let mut out = String::from_utf8_lossy(&self.out).into_owned();
        // libyaml ends a stream whose last scalar is a keep-chomped block (`|+`) with a `...`
        // document end marker; go-yaml's encoder clears `open_ended` before the stream end, so
        // Go never writes it. A column-0 `...` line can only be that marker.
        if out.ends_with("...\n") && (out.len() == 4 || out[..out.len() - 4].ends_with('\n')) {
            out.truncate(out.len() - 4);
        }
        Some(out)
    }
}

impl Drop for Emitter {
    fn drop(&mut self) {
        unsafe { unsafe_libyaml::yaml_emitter_delete(self.e.as_mut_ptr()) }
    }
}

/// The JSON round trip of sigs.k8s.io/yaml.Marshal: integral floats below 1e21 become ints
/// (JSON prints them without a fraction and go-yaml reads them back as ints).
pub fn json_normalize(v: &Value) -> Value {
    match v {
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e21 => {
            if f.abs() < 9.2e18 {
                Value::Int(*f as i64)
            } else {
                Value::Float(*f)
            }
        }
        Value::List(l) => Value::from(l.iter().map(json_normalize).collect::<Vec<_>>()),
        Value::Map(m) => {
            let c: Map = m
                .borrow()
                .iter()
                .map(|(k, v)| (k.clone(), json_normalize(v)))
                .collect();
            Value::from(c)
        }
        Value::Obj(o) => json_normalize(&o.to_value()),
        v => v.clone(),
    }
}

/// go-yaml v2 `Marshal` of an already JSON-normalised value.
pub fn marshal(v: &Value) -> Option<String> {
    Emitter::new().document(v)
}

/// Helm's `toYaml`: `sigs.k8s.io/yaml.Marshal` with the trailing newline trimmed.
pub fn to_yaml(v: &Value) -> String {
    let n = json_normalize(v);
    let mut s = marshal(&n).unwrap_or_default();
    if s.ends_with('\n') {
        s.pop();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_rules() {
        assert_eq!(resolve("yes"), Scalar::Bool(true));
        assert_eq!(resolve("0755"), Scalar::Int(493));
        assert_eq!(resolve("1.0"), Scalar::Float(1.0));
        assert_eq!(resolve("2020-01-01"), Scalar::Timestamp);
        assert_eq!(resolve("abc"), Scalar::Str);
        assert_eq!(resolve("1e3"), Scalar::Float(1000.0));
    }

    #[test]
    fn natural_keys() {
        let mut k = vec!["b", "a10", "a2", "a", "B", "10", "9", "1", "_x"];
        k.sort_by(|a, b| {
            if key_less(a, b) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        });
        assert_eq!(k, vec!["_x", "1", "9", "10", "B", "a", "a2", "a10", "b"]);
    }

    #[test]
    fn to_yaml_basics() {
        let v =
            parse("b: yes\na: [1, 'x', '1.0']\nc: {}\nd: \"line1\\nline2\"\ne: 1000000\n").unwrap();
        let y = to_yaml(&v);
        assert_eq!(
            y,
            "a:\n- 1\n- x\n- \"1.0\"\nb: true\nc: {}\nd: |-\n  line1\n  line2\ne: 1000000"
        );
    }

    /// Helm (4.2.3) renders these exactly: a keep-chomped block (`|+`) last in the document
    /// gets no `...` end marker (libyaml writes one, go-yaml does not).
    #[test]
    fn to_yaml_keep_chomped_last_block_has_no_document_end_marker() {
        let v = parse(
            r#"{"s":"echo\n\n","m":{"a.sh":"echo\n\n","b":"x\n","c":"y","d":"\n\n","e":"z\n\n\n","f":" lead\n\n"},"l":["q\n\n",{"k":"v\n\n"}],"n":{"x":{"y":"deep\n\n"}}}"#,
        )
        .unwrap();
        let y = |k: &str| to_yaml(&v.get(k));
        assert_eq!(y("s"), "|+\n  echo\n");
        assert_eq!(
            y("m"),
            "a.sh: |+\n  echo\n\nb: |\n  x\nc: \"y\"\nd: |2+\n\n\ne: |+\n  z\n\n\nf: |2+\n   lead\n"
        );
        assert_eq!(y("l"), "- |+\n  q\n\n- k: |+\n    v\n");
        assert_eq!(y("n"), "x:\n  \"y\": |+\n    deep\n");
        // a quoted "..." string is content, not a marker
        assert_eq!(to_yaml(&Value::from("...")), "'...'");
        assert_eq!(to_yaml(&parse("a: \"...\"").unwrap()), "a: '...'");
    }

    #[test]
    fn parse_error_text() {
        let e = parse("a: b\nc\n").unwrap_err();
        assert!(e.0.contains("could not find expected ':'"), "{}", e.0);
    }
}
