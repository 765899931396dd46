//! Validating admission webhooks, as kube-apiserver's `ValidatingAdmissionWebhook` plugin
//! calls them: for a create, update (PUT, every patch type, server-side apply), delete or
//! deletecollection of an object, or a write of its `status`/`finalize` subresource, every
//! webhook of every `admissionregistration.k8s.io/v1` `ValidatingWebhookConfiguration` whose
//! rules (operations, apiGroups, apiVersions, resources with `*`, `*/*` and `res/sub`, scope)
//! match, and whose namespaceSelector and objectSelector select the object, is sent an
//! `admission.k8s.io/v1` `AdmissionReview` over HTTPS (trusting its `caBundle`), all in
//! parallel, each bounded by its `timeoutSeconds`. A refusal is answered in kube-apiserver's
//! words (`admission webhook "<name>" denied the request: <message>`, the webhook's code, 400
//! when it gave none below 400); a call that fails is a 500 `failed calling webhook "<name>":
//! <why>` under `failurePolicy: Fail` and is ignored under `Ignore`.
//!
//! **Where and when.** Writes run under the one store lock, synchronously (`ops`), and a
//! webhook is a network call that may take up to 30 s: it must not hold the lock. So a write
//! that some webhook's rules match runs in three steps (`routes/admitted.rs`): (1) under the
//! lock, the write is computed as a dry run — every default, the server's own validation, the
//! no-op check — and the calls are planned (selectors, Service references); (2) unlocked, the
//! webhooks are called with that object; (3) under the lock again, if the stored object is
//! still the one the dry run started from (same resourceVersion; for a create: the name still
//! free), exactly the object the webhooks saw is committed
//! ([`crate::store::Inner::commit_created`], [`crate::store::Inner::commit_updated`]); if
//! someone else wrote it meanwhile, the write starts over from (1) — webhooks called again — as
//! kube-apiserver's `GuaranteedUpdate` retries a compare-and-swap that lost (a request with a
//! resourceVersion then fails with 409 Conflict, one without is applied to the new state). A
//! delete re-checks the same way before deleting. Other requests are served while a webhook is
//! being called. (Why not call under the lock, or re-run the write after the calls: the first
//! stalls every request for up to 30 s; the second would store an object other than the one
//! admitted — a new uid, timestamps, a generated name.)
//!
//! **What costs nothing.** With no configuration stored, a write pays one map lookup (no dry
//! run, no second lock). Configurations are compiled once and cached until one is written
//! (their count and highest resourceVersion are the cache key); a write whose resource no rule
//! names, or whose object no selector selects, runs in one step as before.
//!
//! **Never called for** writes to `validatingwebhookconfigurations` and
//! `mutatingwebhookconfigurations` themselves (as kube-apiserver), and writes the server makes
//! on its own (garbage collection, namespace content deletion, the simulator, the token
//! controller, [`crate::ApiServer::install_object`]). `MutatingWebhookConfiguration`s are
//! stored and served but never called (no mutating admission). `clientConfig.service` is
//! resolved through the Service's Endpoints (the first ready address and the port the service
//! port targets), with the certificate checked for `<name>.<namespace>.svc`; one that cannot
//! be resolved is a failed call. The `warnings` of a response are not passed on.
//!
//! One file per topic: `attributes` (a write as admission sees it), `config` (configuration
//! defaults and validation, the compiled webhooks), `cache` ([`Webhooks`]: compiled once per
//! change), `rules` (rule and selector matching, where to call) and `call` (the
//! AdmissionReview and the HTTPS call). Must not touch: the write semantics (`ops`) or HTTP
//! routing (`routes`).

mod attributes;
mod cache;
mod call;
mod config;
mod rules;

pub(crate) use attributes::{Attributes, Operation};
pub(crate) use cache::Webhooks;
pub(crate) use call::{Review, validate};
pub(crate) use config::{Hook, admit_configuration, is_webhook_configuration};
pub(crate) use rules::{any_rule_matches, plan};
