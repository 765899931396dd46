//! Go's argument conversion rules and spf13/cast-style coercions the template functions share:
//! argument counts, typed arguments, `strval`, `toInt64`/`toFloat64`, Sprig's `strslice` and
//! `empty`. Owns: converting template values into function arguments. Must not touch: the
//! functions themselves (their own files) or the function map (`funcs`).

use crate::template::FuncError;
use crate::value::Value;

/// A template function's answer.
pub(crate) type FR = Result<Value, FuncError>;

/// Checks an exact argument count.
pub(crate) fn want(name: &str, args: &[Value], n: usize) -> Result<(), FuncError> {
    if args.len() != n {
        return Err(FuncError::Arg(format!(
            "wrong number of args for {name}: want {n} got {}",
            args.len()
        )));
    }
    Ok(())
}

/// Checks a minimum argument count (variadic functions).
pub(crate) fn want_min(name: &str, args: &[Value], n: usize) -> Result<(), FuncError> {
    if args.len() < n {
        return Err(FuncError::Arg(format!(
            "wrong number of args for {name}: want at least {n} got {}",
            args.len()
        )));
    }
    Ok(())
}

/// Go conversion of an argument to a `string` parameter.
pub(crate) fn arg_str(v: &Value) -> Result<&str, FuncError> {
    match v {
        Value::Str(s) => Ok(s),
        Value::Nil => Err(FuncError::Arg("invalid value; expected string".into())),
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected string; got {}",
            o.type_name()
        ))),
    }
}

/// Go conversion of an argument to an `int` parameter.
pub(crate) fn arg_int(v: &Value) -> Result<i64, FuncError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Nil => Err(FuncError::Arg("invalid value; expected int".into())),
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected int; got {}",
            o.type_name()
        ))),
    }
}

/// Go conversion of an argument to a `bool` parameter.
pub(crate) fn arg_bool(v: &Value) -> Result<bool, FuncError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Nil => Err(FuncError::Arg("invalid value; expected bool".into())),
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected bool; got {}",
            o.type_name()
        ))),
    }
}

/// Go conversion to a `map[string]interface{}` parameter (nil is allowed).
pub(crate) fn arg_map(v: &Value) -> Result<Option<crate::value::MapRef>, FuncError> {
    match v {
        Value::Map(m) => Ok(Some(m.clone())),
        Value::Nil => Ok(None),
        Value::Obj(o) => match o.to_value() {
            Value::Map(m) => Ok(Some(m)),
            _ => Err(FuncError::Arg(format!(
                "wrong type for value; expected map[string]interface {{}}; got {}",
                o.type_name()
            ))),
        },
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected map[string]interface {{}}; got {}",
            o.type_name()
        ))),
    }
}

/// Sprig `strval`: strings as they are, everything else through `%v`.
pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        v => v.to_go_string(),
    }
}

/// spf13/cast `ToInt64` (lenient; errors give 0).
pub(crate) fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => *b as i64,
        Value::Str(s) => crate::strconv::parse_int_base0(&trim_zero_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// spf13/cast `ToFloat64`.
pub(crate) fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => *b as i64 as f64,
        Value::Str(s) => s.trim().parse::<f64>().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn trim_zero_decimal(s: &str) -> String {
    // cast: "1.0" / "1.00" become "1"
    if let Some((a, b)) = s.split_once('.')
        && !a.is_empty()
        && b.bytes().all(|c| c == b'0')
    {
        return a.to_string();
    }
    s.to_string()
}

/// Sprig `strslice`: a list of strings from a list (nil elements dropped) or a single value.
pub(crate) fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l) => l.iter().filter(|e| !e.is_nil()).map(strval).collect(),
        Value::Nil => Vec::new(),
        v => vec![strval(v)],
    }
}

/// A list argument for Sprig's list functions (`mustX` error text on failure).
pub(crate) fn arg_list(name: &str, v: &Value) -> Result<std::rc::Rc<Vec<Value>>, FuncError> {
    match v {
        Value::List(l) => Ok(l.clone()),
        Value::Obj(o) => match o.to_value() {
            Value::List(l) => Ok(l),
            _ => Err(FuncError::call(format!(
                "Cannot {name} on type {}",
                o.type_name()
            ))),
        },
        o => Err(FuncError::call(format!(
            "Cannot {name} on type {}",
            o.type_name()
        ))),
    }
}

/// Sprig `empty`.
pub(crate) fn is_empty(v: &Value) -> bool {
    !v.truthy()
}
