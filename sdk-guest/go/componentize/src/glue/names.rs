//! Go names for WIT names: `kebab-case` to `CamelCase`, parameter names clear of Go keywords
//! and of the generated code's own variables.
//!
//! Owns: naming. Must not touch: types or layout.

/// `kebab-case` -> `CamelCase`.
pub(super) fn camel(s: &str) -> String {
    s.split(['-', '_'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// A Go parameter name for a WIT one (Go keywords get a trailing underscore).
pub(super) fn go_param(name: &str) -> String {
    let c = camel(name);
    let mut s = c[..1].to_ascii_lowercase() + &c[1..];
    if matches!(
        s.as_str(),
        "type"
            | "func"
            | "range"
            | "map"
            | "chan"
            | "go"
            | "select"
            | "default"
            | "package"
            | "import"
            | "var"
            | "const"
            | "interface"
            | "struct"
            | "switch"
            | "case"
            | "break"
            | "continue"
            | "return"
            | "for"
            | "if"
            | "else"
            | "goto"
            | "defer"
            | "fallthrough"
            | "c"
            | "r"
            | "ret"
            | "args"
            | "mark"
            | "raw"
            | "len"
            | "make"
            | "new"
            | "copy"
            | "append"
            | "string"
            | "error"
            | "h"
    ) {
        s.push('_');
    }
    s
}
