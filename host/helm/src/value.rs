//! The dynamic value model shared by the template engine, the functions and the values logic.
//!
//! It mirrors what a Helm template sees through Go's `interface{}`: `nil`, `bool`, `int`/`int64`
//! (one variant), `float64`, `string`, `[]interface{}` and `map[string]interface{}`. Maps have
//! reference semantics like Go maps (`set`, `merge` mutate in place), so they live behind
//! `Rc<RefCell<…>>`. Host objects with methods (`.Files`, `.Capabilities`) implement [`Object`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

use crate::strconv::format_float_v;

/// A Go `map[string]interface{}`; Go iterates and prints maps in sorted key order.
pub type Map = BTreeMap<String, Value>;

/// A shared, mutable map (Go maps are references).
pub type MapRef = Rc<RefCell<Map>>;

/// A template value.
#[derive(Clone, Default)]
pub enum Value {
    /// Go `nil` (an invalid/absent value).
    #[default]
    Nil,
    /// `bool`
    Bool(bool),
    /// `int` / `int64`
    Int(i64),
    /// `float64`
    Float(f64),
    /// `string`
    Str(Rc<str>),
    /// `[]interface{}`
    List(Rc<Vec<Value>>),
    /// `map[string]interface{}`
    Map(MapRef),
    /// A host object with fields and methods.
    Obj(Rc<dyn Object>),
}

/// A host object: exposes fields and methods to templates, like a Go struct with methods.
pub trait Object {
    /// Go type name, used by `typeOf` and error messages.
    fn type_name(&self) -> &'static str;
    /// A field or zero-argument method.
    fn field(&self, name: &str) -> Option<Value>;
    /// Calls a method with arguments; `None` if there is no such method.
    fn call(&self, _name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        None
    }
    /// Whether `name` is a method (so it may take arguments).
    fn has_method(&self, _name: &str) -> bool {
        false
    }
    /// The plain value used for printing and serialisation.
    fn to_value(&self) -> Value;
    /// Go's truth of the value: structs are always true; map types (`.Files`, a `Glob`) are
    /// true when non-empty.
    fn truthy(&self) -> bool {
        true
    }
    /// Go `reflect.Kind` name (`kindOf`): host objects are pointers unless they say otherwise.
    fn kind_name(&self) -> &'static str {
        "ptr"
    }
    /// Go's `%v` of the object (default: the plain value's).
    fn write_go(&self, out: &mut String) {
        write_go(out, &self.to_value());
    }
}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_go_string())
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        deep_equal(self, other)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(Rc::from(s))
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Rc::from(s))
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}
impl From<Vec<Value>> for Value {
    fn from(v: Vec<Value>) -> Self {
        Value::List(Rc::new(v))
    }
}
impl From<Map> for Value {
    fn from(m: Map) -> Self {
        Value::Map(Rc::new(RefCell::new(m)))
    }
}

impl Value {
    /// A new empty map value.
    pub fn new_map() -> Value {
        Value::from(Map::new())
    }

    /// Resolves host objects to their plain value; other values are returned as they are.
    pub fn plain(&self) -> Value {
        match self {
            Value::Obj(o) => o.to_value(),
            v => v.clone(),
        }
    }

    /// `true` for nil.
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// The string slice if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The map if this is a map.
    pub fn as_map(&self) -> Option<&MapRef> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// Go's `truth`: the value is non-zero / non-empty.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            Value::Obj(o) => o.truthy(),
        }
    }

    /// Go `reflect.Kind` name (for `kindOf`/`kindIs`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "slice",
            Value::Map(_) => "map",
            Value::Obj(o) => o.kind_name(),
        }
    }

    /// Go type name (for `typeOf` and error messages).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "[]interface {}",
            Value::Map(_) => "map[string]interface {}",
            Value::Obj(o) => o.type_name(),
        }
    }

    /// Go `fmt.Sprint(v)` (`%v`): nil prints `<nil>`.
    pub fn to_go_string(&self) -> String {
        let mut s = String::new();
        write_go(&mut s, self);
        s
    }

    /// How a template action prints a value: like `%v`, but nil is `<no value>`.
    pub fn to_template_string(&self) -> String {
        match self {
            Value::Nil => "<no value>".to_string(),
            Value::Str(s) => s.to_string(),
            v => v.to_go_string(),
        }
    }

    /// Deep copy (maps are copied, not shared).
    pub fn deep_copy(&self) -> Value {
        match self {
            Value::Map(m) => {
                let c: Map = m
                    .borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.deep_copy()))
                    .collect();
                Value::from(c)
            }
            Value::List(l) => Value::from(l.iter().map(|v| v.deep_copy()).collect::<Vec<_>>()),
            v => v.clone(),
        }
    }

    /// Length of a string, list or map.
    pub fn len(&self) -> Option<usize> {
        match self {
            Value::Str(s) => Some(s.len()),
            Value::List(l) => Some(l.len()),
            Value::Map(m) => Some(m.borrow().len()),
            Value::Obj(o) => o.to_value().len(),
            _ => None,
        }
    }

    /// Whether `len` is zero (for non-collections: `false`).
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Looks up a map key (nil for missing key or non-map).
    pub fn get(&self, key: &str) -> Value {
        match self {
            Value::Map(m) => m.borrow().get(key).cloned().unwrap_or(Value::Nil),
            Value::Obj(o) => o.field(key).unwrap_or(Value::Nil),
            _ => Value::Nil,
        }
    }
}

/// Writes Go's `%v` form of `v` into `out`.
pub fn write_go(out: &mut String, v: &Value) {
    match v {
        Value::Nil => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&format_float_v(*f)),
        Value::Str(s) => out.push_str(s),
        Value::List(l) => {
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_go(out, e);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push_str("map[");
            for (i, (k, e)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_go(out, e);
            }
            out.push(']');
        }
        Value::Obj(o) => o.write_go(out),
    }
}

/// `reflect.DeepEqual` on template values.
pub fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| deep_equal(a, b))
        }
        (Value::Map(x), Value::Map(y)) => {
            if Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((ka, va), (kb, vb))| ka == kb && deep_equal(va, vb))
        }
        (Value::Obj(x), Value::Obj(y)) => Rc::ptr_eq(x, y),
        _ => false,
    }
}
