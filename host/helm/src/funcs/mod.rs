//! The template function map: Go's builtins, Sprig v3.3 (minus `env`/`expandenv`) and Helm's
//! additions, with Go's argument conversion rules and spf13/cast-style coercions.

mod args;
mod builtins;
mod crypto;
mod helm;
mod lists;
mod misc;
pub mod semver;
mod strings;
mod time;

use std::collections::HashMap;

use crate::template::Func;

/// Builds the complete function map Helm installs.
pub fn func_map() -> HashMap<&'static str, Func> {
    let mut m: HashMap<&'static str, Func> = HashMap::with_capacity(256);
    builtins::register(&mut m);
    strings::register(&mut m);
    lists::register(&mut m);
    misc::register(&mut m);
    crypto::register(&mut m);
    time::register(&mut m);
    helm::register(&mut m);
    m
}
