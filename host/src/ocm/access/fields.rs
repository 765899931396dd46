//! Lenient string fields of access specs: what the reader took before the specs were typed.
//!
//! Owns: field decoding. Must not touch: what a field means.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A string field; anything else (absent, a number) reads as absent, so a malformed field gets
/// the same message as a missing one.
pub(super) fn string_or_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Value::deserialize(d)?.as_str().map(str::to_string))
}

/// Like [`string_or_none`], empty when not a string.
pub(super) fn string_or_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(string_or_none(d)?.unwrap_or_default())
}
