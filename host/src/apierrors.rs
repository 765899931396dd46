//! What an API server's answer means, decided by its kind — the HTTP code and the `Status`
//! reason — never by message text.
//!
//! The case that matters most: a real kube-apiserver answers a path nothing serves (an unknown
//! group, or a resource of a CRD group whose CRD is not installed) with Go's plain-text
//! `404 page not found`, not with a JSON `Status` `NotFound`. kube-client reports that as a 404
//! whose reason is not `NotFound`, and `get_opt` returns it as an error. [`get`] tells the two
//! apart, so "the object is missing" and "the cluster does not serve the kind" each get handled.

use kube::Api;
use serde::de::DeserializeOwned;

/// The answer to a GET of one object.
#[derive(Debug)]
pub enum Lookup<K> {
    Found(K),
    /// The kind is served, the object does not exist (a `Status` with reason `NotFound`).
    Missing,
    /// Nothing serves the kind (a 404 that is not a `NotFound` Status).
    KindNotServed,
}

/// What a 404 means, if `e` is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotFound {
    Object,
    Kind,
}

/// Classifies a 404 by its `Status` reason: `NotFound` is a missing object; a 404 without it
/// (kube-client's reason for a body that is not a Status) is a path nobody serves.
pub fn not_found(e: &kube::Error) -> Option<NotFound> {
    match e {
        kube::Error::Api(s) if s.code == 404 && s.reason == "NotFound" => Some(NotFound::Object),
        kube::Error::Api(s) if s.code == 404 => Some(NotFound::Kind),
        _ => None,
    }
}

/// What went wrong, for a human: the API server's own message (`<code> <reason>: <message>`)
/// instead of kube-client's debug rendering of the whole `Status`.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => {
            format!("{} {}: {}", s.code, s.reason, s.message)
        }
        other => other.to_string(),
    }
}

/// GETs `name`, with "missing" and "kind not served" as answers rather than errors.
pub async fn get<K>(api: &Api<K>, name: &str) -> Result<Lookup<K>, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(obj) => Ok(Lookup::Found(obj)),
        Err(e) => match not_found(&e) {
            Some(NotFound::Object) => Ok(Lookup::Missing),
            Some(NotFound::Kind) => Ok(Lookup::KindNotServed),
            None => Err(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("m", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_not_found_status_is_a_missing_object_and_any_other_404_an_unserved_kind() {
        assert_eq!(
            not_found(&api_error(404, "NotFound")),
            Some(NotFound::Object)
        );
        // kube-client's reason for Go's plain-text "404 page not found".
        assert_eq!(
            not_found(&api_error(404, "Failed to parse error data")),
            Some(NotFound::Kind)
        );
        assert_eq!(not_found(&api_error(403, "Forbidden")), None);
        assert_eq!(not_found(&api_error(409, "Conflict")), None);
    }

    #[test]
    fn messages_are_the_servers_not_a_debug_dump() {
        let m = message(&api_error(403, "Forbidden"));
        assert_eq!(m, "403 Forbidden: m");
        assert!(!m.contains("Status {"));
    }
}
