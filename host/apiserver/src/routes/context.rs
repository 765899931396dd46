//! What a resource handler knows about its request: the storage resource and the one the
//! client asked for (they differ for a view), the namespace, query and headers; rendering,
//! selectors, write options and audit entries in those terms.
//!
//! Owns: [`Ctx`]. Must not touch: the verbs (`read`, `write`, `delete`).

use super::body::{obj_response, render};
use super::query::{Query, header_str, selector};
use crate::ops::WriteOpts;
use crate::registry::ResourceType;
use crate::selectors::Selector;
use crate::status::{ApiError, json_response};
use crate::store::Obj;
use crate::views::View;
use crate::{ApiServer, AuditEntry};
use axum::response::Response;
use http::{HeaderMap, header};
use serde_json::Value;
use std::sync::Arc;

pub(super) struct Ctx<'a> {
    pub(super) api: &'a ApiServer,
    /// The resource whose storage serves the request (for a view: the viewed one).
    pub(super) rt: Arc<ResourceType>,
    pub(super) version: &'a str,
    /// The resource and version the client asked for (`rt`/`version` unless it is a view).
    pub(super) out_rt: Arc<ResourceType>,
    pub(super) out_version: &'a str,
    pub(super) view: Option<View>,
    pub(super) ns: &'a str,
    pub(super) q: &'a Query,
    pub(super) headers: &'a HeaderMap,
}

impl Ctx<'_> {
    /// A stored object as the client asked for it.
    pub(super) fn present(&self, obj: &Obj) -> Value {
        match self.view {
            Some(v) => v.from_storage(obj, &self.out_rt.api_version(self.out_version)),
            None => render(obj, &self.rt, self.version),
        }
    }

    pub(super) fn respond(&self, code: u16, obj: &Obj) -> Response {
        match self.view {
            Some(_) => json_response(code, &self.present(obj)),
            None => obj_response(code, obj, &self.rt, self.version),
        }
    }

    /// A request body in the storage resource's terms.
    pub(super) fn incoming(&self, body: Value) -> Value {
        match self.view {
            Some(v) => v.to_storage(&body),
            None => body,
        }
    }

    pub(super) fn selector(&self) -> Result<Selector, ApiError> {
        match self.view {
            Some(v) => Selector::parse(
                self.q.get("labelSelector"),
                self.q
                    .get("fieldSelector")
                    .map(|f| v.field_selector_to_storage(f))
                    .as_deref(),
            ),
            None => selector(self.q),
        }
    }

    pub(super) fn write_opts(&self) -> WriteOpts {
        WriteOpts {
            dry_run: self.q.get("dryRun").is_some_and(|v| !v.is_empty()),
            field_manager: self.q.get("fieldManager").map(str::to_string),
            force: self.q.flag("force"),
            strict_fields: self.q.get("fieldValidation") == Some("Strict"),
        }
    }

    pub(super) fn audit(
        &self,
        verb: &str,
        name: &str,
        sub: Option<&str>,
        obj: &Value,
        changed: bool,
    ) {
        let s = &self.api.shared;
        if !s.audit_on.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let ua = header_str(self.headers, header::USER_AGENT);
        let e = AuditEntry {
            verb: verb.to_string(),
            resource: self.rt.qualified(),
            namespace: self.ns.to_string(),
            name: name.to_string(),
            subresource: sub.map(str::to_string),
            user_agent: (!ua.is_empty()).then(|| ua.to_string()),
            field_manager: self.q.get("fieldManager").map(str::to_string),
            resource_version: obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            changed,
        };
        s.audit.lock().unwrap_or_else(|e| e.into_inner()).push(e);
    }
}
