//! Query strings (in order, percent-decoded, Kubernetes' leading `?&` included) and header
//! helpers.
//!
//! Owns: [`Query`]. Must not touch: what the parameters mean to a verb.

use crate::selectors::Selector;
use crate::status::ApiError;
use http::{HeaderMap, header};

/// Decoded query parameters, in order.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 3 <= b.len() && hex(b[i + 1]).is_some() && hex(b[i + 2]).is_some() => {
                out.push((hex(b[i + 1]).unwrap_or(0) * 16 + hex(b[i + 2]).unwrap_or(0)) as u8);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Query {
    pub fn parse(q: &str) -> Self {
        Query(
            q.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (percent_decode(k), percent_decode(v)),
                    None => (percent_decode(p), String::new()),
                })
                .collect(),
        )
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
    pub(super) fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true") | Some("1") | Some(""))
    }
}

pub(super) fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

pub(super) fn media_type(ct: &str) -> String {
    ct.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

pub(super) fn selector(q: &Query) -> Result<Selector, ApiError> {
    Selector::parse(q.get("labelSelector"), q.get("fieldSelector"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_decoding() {
        let q = Query::parse("&labelSelector=app+in+%28a%2Cb%29&watch=true&x");
        assert_eq!(q.get("labelSelector"), Some("app in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("x"), Some(""));
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
