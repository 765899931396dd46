//! What an API server's answer means, decided by its kind — the HTTP code and the `Status`
//! reason — never by message text.
//!
//! The case that matters most: a real kube-apiserver answers a path nothing serves (an unknown
//! group, or a resource of a CRD group whose CRD is not installed) with Go's plain-text
//! `404 page not found`, not with a JSON `Status` `NotFound`. kube-client reports that as a 404
//! whose reason is not `NotFound`, and `get_opt` returns it as an error. [`get`] tells the two
//! apart, so "the object is missing" and "the cluster does not serve the kind" each get handled.
//!
//! Also here: which answers are worth another try ([`transient`], [`retry_transient`]: set-up
//! steps ride out a busy or faulty server as the controller does), and how an error reads on a
//! terminal ([`render_chain`]: the server's message, never kube-client's debug dump of the
//! `Status`).

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

/// Whether `e` is worth another try: the server was busy or unavailable, timed out, answered
/// a write with a conflict (not an `AlreadyExists`) or an internal error, or the connection
/// failed. Everything else (refusals, validation, missing objects) fails for good.
pub fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            matches!(s.code, 429 | 500 | 502 | 503 | 504)
                || (s.code == 409 && s.reason != "AlreadyExists")
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Whether any cause in `e`'s chain is a [`transient`] API error.
pub fn transient_in(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.downcast_ref::<kube::Error>().is_some_and(transient))
}

/// Runs `step` until it succeeds, fails for good (not [`transient_in`]), or `attempts` tries are
/// used; waits 20 ms, then twice as long each time (at most 1 s). The step must be safe to
/// repeat (get-then-create, create-or-replace): a 504 may come after the write was applied.
pub async fn retry_transient<T, F, Fut>(what: &str, attempts: u32, mut step: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut wait = std::time::Duration::from_millis(20);
    let mut attempt = 1;
    loop {
        match step().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < attempts && transient_in(&e) => {
                tracing::debug!(step = what, attempt, error = %render_chain(&e), "transient error, trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(std::time::Duration::from_secs(1));
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One API error for a human: `the API server refused the request: <message> (<code> <reason>)`.
pub fn render_status(s: &kube::core::Status) -> String {
    let message = if s.message.is_empty() {
        "no message"
    } else {
        s.message.as_str()
    };
    match (s.code, s.reason.as_str()) {
        (0, "") => format!("the API server refused the request: {message}"),
        (code, "") => format!("the API server refused the request: {message} ({code})"),
        (code, reason) => {
            format!("the API server refused the request: {message} ({code} {reason})")
        }
    }
}

/// An error and its causes on one line, `: `-separated, as a terminal shows it: API errors as
/// [`render_status`] (kube-client's `Display` carries a debug dump of the whole `Status`, also
/// where a wrapping error quoted it), and a cause whose text its parent already said left out.
pub fn render_chain(e: &anyhow::Error) -> String {
    render_causes(&e.chain().collect::<Vec<_>>())
}

/// [`render_chain`] for any error (and its `source()` chain): what log lines show.
pub fn render_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = Vec::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        chain.push(c);
        cause = c.source();
    }
    render_causes(&chain)
}

fn render_causes(chain: &[&(dyn std::error::Error + 'static)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut skip_status = false;
    for cause in chain {
        let status = match cause.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => {
                skip_status = true;
                Some(&**s)
            }
            Some(_) => None,
            None => match cause.downcast_ref::<kube::core::Status>().or_else(|| {
                cause
                    .downcast_ref::<Box<kube::core::Status>>()
                    .map(|b| &**b)
            }) {
                // kube-client's `Api` error names its `Status` as its source: said already.
                Some(_) if std::mem::take(&mut skip_status) => continue,
                other => other,
            },
        };
        let text = match status {
            Some(s) => {
                let rendered = render_status(s);
                // A wrapper that quoted kube-client's text says the rendered one instead.
                let raw = cause.to_string();
                for part in &mut parts {
                    *part = part.replace(&raw, &rendered);
                }
                rendered
            }
            None => cause.to_string(),
        };
        if parts.last().is_some_and(|last| last.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
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
    fn a_chain_with_an_api_error_reads_as_the_servers_message_without_a_debug_dump() {
        // As dev mode's set-up failed under an injected 504 before it retried.
        let status =
            kube::core::Status::failure("injected fault: the request timed out", "Timeout")
                .with_code(504);
        let e =
            anyhow::Error::new(kube::Error::Api(status.boxed())).context("creating Target default");
        let text = render_chain(&e);
        assert_eq!(
            text,
            "creating Target default: the API server refused the request: injected fault: the request timed out (504 Timeout)"
        );
        assert!(!text.contains("Status {"), "{text}");
        assert!(!text.contains("Some("), "{text}");
        // Plain causes are joined; a cause its parent already quoted is said once.
        let io = std::io::Error::other("disk full");
        let e = anyhow::Error::new(io)
            .context("writing x: disk full")
            .context("saving");
        assert_eq!(render_chain(&e), "saving: writing x: disk full");
    }

    #[test]
    fn an_error_that_quotes_a_kube_error_reads_as_the_servers_message_too() {
        #[derive(Debug, thiserror::Error)]
        #[error("step failed: {0}")]
        struct Wrapper(#[source] kube::Error);
        let e = Wrapper(api_error(503, "ServiceUnavailable"));
        assert!(
            e.to_string().contains("Status {"),
            "the raw text dumps the Status"
        );
        assert_eq!(
            render_error(&e),
            "step failed: the API server refused the request: m (503 ServiceUnavailable)"
        );
        assert_eq!(
            render_error(&api_error(409, "Conflict")),
            "the API server refused the request: m (409 Conflict)"
        );
    }

    #[test]
    fn conflicts_timeouts_and_unavailability_are_transient_refusals_are_not() {
        for (code, reason) in [
            (409, "Conflict"),
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
            (504, "Timeout"),
            (429, "TooManyRequests"),
        ] {
            assert!(transient(&api_error(code, reason)), "{code} {reason}");
        }
        for (code, reason) in [
            (409, "AlreadyExists"),
            (403, "Forbidden"),
            (404, "NotFound"),
            (422, "Invalid"),
        ] {
            assert!(!transient(&api_error(code, reason)), "{code} {reason}");
        }
        let wrapped = anyhow::Error::new(api_error(504, "Timeout")).context("step");
        assert!(transient_in(&wrapped));
    }

    #[tokio::test]
    async fn retry_transient_retries_transient_errors_only() {
        let calls = std::sync::atomic::AtomicU32::new(0);
        let v = retry_transient("test", 5, || async {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < 2 {
                Err(anyhow::Error::new(api_error(503, "ServiceUnavailable")))
            } else {
                Ok(n)
            }
        })
        .await
        .unwrap();
        assert_eq!(v, 2);
        calls.store(0, std::sync::atomic::Ordering::SeqCst);
        let e = retry_transient("test", 5, || async {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err::<(), _>(anyhow::Error::new(api_error(403, "Forbidden")))
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1, "{e}");
    }

    #[test]
    fn messages_are_the_servers_not_a_debug_dump() {
        let m = message(&api_error(403, "Forbidden"));
        assert_eq!(m, "403 Forbidden: m");
        assert!(!m.contains("Status {"));
    }
}
