//! Sprig's `certificate` struct (`{Cert, Key string}`) and the arguments of the certificate
//! functions (a `certificate`, `[]interface{}` lists of IPs and DNS names). Owns: how those
//! values look to templates. Must not touch: building certificates (`x509`).

use std::rc::Rc;

use super::super::args::{arg_int, arg_str};
use crate::template::FuncError;
use crate::value::{Map, Object, Value};

/// Sprig's `certificate{Cert, Key string}`: a struct with two string fields.
pub(super) struct SprigCertificate {
    pub cert: String,
    pub key: String,
}

pub(super) const CERT_TYPE: &str = "sprig.certificate";

impl Object for SprigCertificate {
    fn type_name(&self) -> &'static str {
        CERT_TYPE
    }
    fn kind_name(&self) -> &'static str {
        "struct"
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Cert" => Some(Value::from(self.cert.as_str())),
            "Key" => Some(Value::from(self.key.as_str())),
            _ => None,
        }
    }
    /// As `encoding/json` sees the struct (`toJson`, `toYaml`): `{"Cert": …, "Key": …}`.
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("Cert".into(), Value::from(self.cert.as_str()));
        m.insert("Key".into(), Value::from(self.key.as_str()));
        Value::from(m)
    }
    /// Go's `%v` of a struct: `{cert key}`.
    fn write_go(&self, out: &mut String) {
        out.push('{');
        out.push_str(&self.cert);
        out.push(' ');
        out.push_str(&self.key);
        out.push('}');
    }
}

pub(super) fn cert_value(cert: String, key: String) -> Value {
    Value::Obj(Rc::new(SprigCertificate { cert, key }))
}

/// A `certificate` parameter: only Sprig's struct converts (Go's reflect rule).
pub(super) fn arg_cert(v: &Value) -> Result<(String, String), FuncError> {
    match v {
        Value::Obj(o) if o.type_name() == CERT_TYPE => {
            let s = |n| match o.field(n) {
                Some(Value::Str(s)) => s.to_string(),
                _ => String::new(),
            };
            Ok((s("Cert"), s("Key")))
        }
        Value::Nil => Err(FuncError::Arg(format!(
            "invalid value; expected {CERT_TYPE}"
        ))),
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected {CERT_TYPE}; got {}",
            o.type_name()
        ))),
    }
}

/// A `[]interface{}` parameter (nil is an empty slice).
pub(super) fn arg_iface_list(v: &Value) -> Result<Vec<Value>, FuncError> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::List(l) => Ok(l.to_vec()),
        Value::Obj(o) => match o.to_value() {
            Value::List(l) => Ok(l.to_vec()),
            _ => Err(FuncError::Arg(format!(
                "wrong type for value; expected []interface {{}}; got {}",
                o.type_name()
            ))),
        },
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected []interface {{}}; got {}",
            o.type_name()
        ))),
    }
}

pub(super) type CertArgs<'a> = (&'a str, Vec<Value>, Vec<Value>, i64);

pub(super) fn cert_args(a: &[Value]) -> Result<CertArgs<'_>, FuncError> {
    Ok((
        arg_str(&a[0])?,
        arg_iface_list(&a[1])?,
        arg_iface_list(&a[2])?,
        arg_int(&a[3])?,
    ))
}
