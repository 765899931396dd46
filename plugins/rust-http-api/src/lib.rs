//! rust-http-api: the example http-api deployer in Rust, the same as
//! `plugins/<lang>/http-api` (and the `plugin new --lang rust` http-api template).
//!
//! With a Target of type `wasm-deployer.dev/http-api` (`spec.config.url`), a DeployItem
//! `spec.config = {"path": "things/a", "body": {...}}`:
//! - reconcile: `PUT <url>/<path>` with `body` as JSON; 2xx -> `Succeeded`, exports
//!   `{"status": <code>, "body": <the JSON answer, or null>}`;
//! - delete: `DELETE <url>/<path>`; 2xx or 404 -> done.
//!
//! Other answers and failures follow the SDK's mapping (`sdk_guest::http`): 401/403
//! `ERR_UNAUTHORIZED`, other 4xx `ERR_CONFIGURATION_PROBLEM`, 5xx and transport failures
//! retried. The host adds the Target's credentials; the plugin never sees them.

use sdk_guest::http::{HttpRequest, HttpResponse, InvocationHttp, status_error};
use sdk_guest::{Ctx, Deployer, DeployerError, Description, Invocation, Response, export_deployer};
use serde_json::{Value, json};

pub struct HttpApi;

/// `spec.config.path` (checked by `http_url`: relative, no `..`) and `spec.config.body`.
fn config(inv: &Invocation) -> Result<(String, Value), DeployerError> {
    let config = inv.provider_config_present()?;
    if !config.is_object() {
        return Err(DeployerError::configuration(
            "ParseProviderConfiguration",
            "spec.config must be an object with \"path\" and \"body\"",
        ));
    }
    let path = match config.get("path") {
        Some(Value::String(p)) if !p.is_empty() => p.clone(),
        Some(_) => {
            return Err(DeployerError::configuration(
                "InvalidPath",
                "spec.config.path must be a non-empty string",
            ));
        }
        None => {
            return Err(DeployerError::configuration(
                "InvalidPath",
                "spec.config.path is missing (the API path under the Target's url)",
            ));
        }
    };
    Ok((path, config.get("body").cloned().unwrap_or(Value::Null)))
}

/// A 3xx is not followed (the host does not either): the Target should name the final URL.
fn redirect_error(method: &str, url: &str, response: &HttpResponse) -> DeployerError {
    DeployerError::configuration(
        "HttpRedirect",
        format!(
            "{method} {url}: {} redirect to {:?} (not followed: point the Target's url at the final location)",
            response.status,
            response.header("location").unwrap_or_default(),
        ),
    )
}

impl Deployer for HttpApi {
    fn describe() -> Description {
        Description {
            name: "rust-http-api".into(),
            version: "0.1.0".into(),
            deploy_item_types: vec!["example.wasm-deployer.dev/rust-http-api".into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let (path, body) = config(&inv)?;
        let url = inv.http_url(&path)?;
        ctx.info(&format!("http-api: PUT {url}"));
        let response = ctx
            .http(HttpRequest::put(&url).json(&body))?
            .error_for_status("PUT", &url)?;
        if !response.is_success() {
            return Err(redirect_error("PUT", &url, &response));
        }
        Ok(Response {
            phase: Some("Succeeded".into()),
            exports: Some(json!({"status": response.status, "body": response.json_or_null()})),
            ..Default::default()
        })
    }

    fn delete(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let (path, _) = config(&inv)?;
        let url = inv.http_url(&path)?;
        ctx.info(&format!("http-api: DELETE {url}"));
        let response = ctx.http(HttpRequest::delete(&url))?;
        if response.status == 404 {
            ctx.info(&format!("http-api: {url} was already gone"));
        } else if let Some(e) = status_error("DELETE", &url, response.status, &response.body) {
            return Err(e);
        } else if !response.is_success() {
            return Err(redirect_error("DELETE", &url, &response));
        }
        Ok(Response::default())
    }
}

export_deployer!(HttpApi);

#[cfg(test)]
mod tests {
    use super::*;
    use sdk_guest::http::{HttpRequest, TransportError};
    use sdk_guest::{KubeOp, LogLevel, NativeHost, ResolvedTarget, Target};
    use std::sync::Mutex;

    /// Stands in for the API: answers every request with `status`, records what it got.
    struct Api {
        status: u16,
        sent: Mutex<Vec<(String, String, Vec<u8>)>>,
    }

    impl NativeHost for Api {
        fn log(&self, _: LogLevel, _: &str) {}
        fn checkpoint(&self, _: &str) -> Result<(), DeployerError> {
            Ok(())
        }
        fn remaining(&self) -> Option<std::time::Duration> {
            None
        }
        fn kube(&self, _: KubeOp) -> Result<Option<String>, DeployerError> {
            Ok(None)
        }
        fn http(&self, r: &HttpRequest) -> Result<HttpResponse, TransportError> {
            let mut sent = self.sent.lock().unwrap();
            sent.push((r.method.clone(), r.url.clone(), r.body.clone()));
            Ok(HttpResponse {
                status: self.status,
                headers: vec![],
                body: br#"{"id": 7}"#.to_vec(),
            })
        }
    }

    fn invocation(config: Value) -> Invocation {
        let mut inv = Invocation::for_item(json!({"spec": {"type": "x", "config": config}}));
        let mut target = Target::default();
        target.spec.type_ = "wasm-deployer.dev/http-api".into();
        inv.target = Some(ResolvedTarget {
            target,
            content: json!({"url": "https://api.example.com/v1"}).to_string(),
        });
        inv
    }

    fn api(status: u16) -> Api {
        Api {
            status,
            sent: Mutex::new(vec![]),
        }
    }

    #[test]
    fn reconcile_puts_the_body_and_exports_the_answer() {
        let host = api(201);
        let inv = invocation(json!({"path": "things/a", "body": {"size": 3}}));
        let out = HttpApi::reconcile(&Ctx::native(&host), inv).unwrap();
        assert_eq!(out.exports, Some(json!({"status": 201, "body": {"id": 7}})));
        let sent = host.sent.lock().unwrap();
        assert_eq!(sent[0].0, "PUT");
        assert_eq!(sent[0].1, "https://api.example.com/v1/things/a");
        assert_eq!(sent[0].2, br#"{"size":3}"#);
    }

    #[test]
    fn answers_and_configs_map_onto_errors() {
        let inv = || invocation(json!({"path": "things/a"}));
        let reason = |status, delete: bool| {
            let host = api(status);
            let ctx = Ctx::native(&host);
            let r = if delete {
                HttpApi::delete(&ctx, inv())
            } else {
                HttpApi::reconcile(&ctx, inv())
            };
            r.err().map(|e| e.reason)
        };
        assert_eq!(reason(401, false).as_deref(), Some("Unauthorized"));
        assert_eq!(reason(404, false).as_deref(), Some("HttpClientError"));
        assert_eq!(reason(502, false).as_deref(), Some("HttpServerError"));
        assert_eq!(reason(301, false).as_deref(), Some("HttpRedirect"));
        assert_eq!(reason(404, true), None);
        assert_eq!(reason(409, true).as_deref(), Some("HttpClientError"));
        let host = api(200);
        for bad in [
            json!({"path": 3}),
            json!({"path": "https://x/y"}),
            json!("s"),
        ] {
            let e = HttpApi::reconcile(&Ctx::native(&host), invocation(bad)).unwrap_err();
            assert!(e.has_code(sdk_guest::codes::CONFIGURATION_PROBLEM), "{e}");
        }
        assert!(host.sent.lock().unwrap().is_empty());
    }
}
