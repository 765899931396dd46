//! GET and LIST on the store.
//!
//! Owns: [`Inner::get`] and [`Inner::list`]. Must not touch: writes.

use super::admission::meta;
use crate::registry::ResourceType;
use crate::selectors::Selector;
use crate::status::ApiError;
use crate::store::{Inner, Obj};
use serde_json::Value;

impl Inner {
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Obj, ApiError> {
        self.lookup(&rt.key(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Matching objects and the continue token of the next page.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        sel: &Selector,
        limit: Option<usize>,
        cont: Option<&str>,
    ) -> (Vec<Obj>, Option<String>) {
        let all = self.objects_of(&rt.key(), ns);
        let start = match cont {
            Some(c) if !c.is_empty() => {
                let (cns, cname) = c.split_once('/').unwrap_or(("", c));
                all.partition_point(|o| {
                    let m = meta(o);
                    let ons = m
                        .and_then(|m| m.get("namespace"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let oname = m
                        .and_then(|m| m.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    (ons, oname) <= (cns, cname)
                })
            }
            _ => 0,
        };
        let mut out = Vec::new();
        let mut next = None;
        for o in &all[start..] {
            if !sel.matches(o) {
                continue;
            }
            if let Some(l) = limit
                && l > 0
                && out.len() == l
            {
                let last: &Obj = out.last().expect("non-empty");
                let m = meta(last);
                next = Some(format!(
                    "{}/{}",
                    m.and_then(|m| m.get("namespace"))
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    m.and_then(|m| m.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                ));
                break;
            }
            out.push(o.clone());
        }
        (out, next)
    }
}
