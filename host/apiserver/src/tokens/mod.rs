//! kube-controller-manager's ServiceAccount token controller, and the authenticator of the
//! tokens it writes (legacy ServiceAccount tokens). On by default, with [`crate::Options::rbac`]
//! or without (the tokens only mean something with it).
//!
//! A Secret of type `kubernetes.io/service-account-token` annotated
//! `kubernetes.io/service-account.name: <sa>`, without `data.token`, not being deleted, whose
//! ServiceAccount `<sa>` exists in its namespace, gets in the request that created or updated it
//! a second write (a MODIFIED event, as [`crate::simulate`] commits, so a GET right after the
//! create already sees it): `data.token` (a fresh token), `data.namespace`, `data.ca.crt` (the CA
//! of the certificate the server serves HTTPS with, when it does) and the annotation
//! `kubernetes.io/service-account.uid`. Without the ServiceAccount the Secret is left as it is
//! and filled when the ServiceAccount is created. (kube-controller-manager deletes such a
//! Secret instead; clients that create the ServiceAccount first never see the difference.)
//!
//! A token authenticates as `system:serviceaccount:<ns>:<sa>` (groups `system:serviceaccounts`,
//! `system:serviceaccounts:<ns>`, `system:authenticated`), without expiry, while its Secret
//! exists (not being deleted) and still holds it, and the ServiceAccount the Secret names, with
//! the uid of its annotation, exists (not being deleted): deleting either is a 401, as the
//! real legacy token authenticator answers. The lookup is the token index (token → Secret),
//! kept by every commit and rebuilt when a persisted store is loaded, so a token lives as long
//! as its Secret, across restarts too.
//!
//! A token is `eas-sa.<nonce>.<mac>`, the MAC an HMAC-SHA256 of the Secret's uid and the nonce
//! under a key of the server's, as kube-apiserver signs its legacy tokens: only a token this
//! controller wrote into that very Secret authenticates, not one a client writes into a Secret
//! (a client that may create Secrets but not read them gains nothing) nor one copied into
//! another. The key is random per process, or kept in `<data dir>/sa-token.key`
//! ([`load_or_create_key`]).
//!
//! Owns: those Secrets' `data.token`, `data.namespace`, `data.ca.crt` and uid annotation (only
//! while `data.token` is missing), the token index and the key (`state`). Must not touch: any
//! other Secret, a Secret that already has a token (a client's token is kept; it just does not
//! authenticate), ServiceAccounts (no `secrets` list is written into them), TokenRequest tokens
//! (`auth`), authorization (`rbac`).

mod state;

pub(crate) use state::TokenController;
pub use state::{
    KEY_FILE, SECRET_TYPE, SERVICE_ACCOUNT_NAME, SERVICE_ACCOUNT_UID, load_or_create_key,
};

use crate::builtin::base64_encode;
use crate::rbac::UserInfo;
use crate::registry::ResourceType;
use crate::store::{Inner, uid_of};
use serde_json::{Value, json};
use state::{is_token_secret, token_of};
use std::sync::Arc;

const SECRETS_KEY: &str = "/secrets";
const SERVICE_ACCOUNTS_KEY: &str = "/serviceaccounts";

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")?
        .get(key)?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}
impl Inner {
    /// After a committed create or main-resource write: a token Secret waiting for its token
    /// gets it; a ServiceAccount's waiting Secrets get theirs.
    pub(crate) fn service_account_tokens_after(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
    ) {
        match rt.key().as_str() {
            SECRETS_KEY => self.fill_token(rt, ns, name),
            SERVICE_ACCOUNTS_KEY => {
                let Some(secrets) = self.registry.by_key(SECRETS_KEY).cloned() else {
                    return;
                };
                let waiting: Vec<String> = self
                    .objects_of(SECRETS_KEY, Some(ns))
                    .iter()
                    .filter(|s| annotation(s, SERVICE_ACCOUNT_NAME) == Some(name))
                    .filter_map(|s| s.pointer("/metadata/name")?.as_str().map(str::to_string))
                    .collect();
                for secret in waiting {
                    self.fill_token(&secrets, ns, &secret);
                }
            }
            _ => {}
        }
    }

    fn fill_token(&mut self, rt: &ResourceType, ns: &str, name: &str) {
        let Some(cur) = self.lookup(SECRETS_KEY, ns, name).cloned() else {
            return;
        };
        if !is_token_secret(&cur) || deleting(&cur) || token_of(&cur).is_some() {
            return;
        }
        let Some(sa_name) = annotation(&cur, SERVICE_ACCOUNT_NAME) else {
            return;
        };
        let Some(sa) = self.lookup(SERVICE_ACCOUNTS_KEY, ns, sa_name) else {
            return;
        };
        let sa_uid = uid_of(sa).to_string();
        // A Secret bound to an earlier ServiceAccount of that name waits too.
        if deleting(sa) || annotation(&cur, SERVICE_ACCOUNT_UID).is_some_and(|u| u != sa_uid) {
            return;
        }
        let token = self.service_account_tokens.mint(uid_of(&cur));
        let mut next = (*cur).clone();
        if !next.get("data").is_some_and(Value::is_object) {
            next["data"] = json!({});
        }
        next["data"]["token"] = json!(base64_encode(token.as_bytes()));
        next["data"]["namespace"] = json!(base64_encode(ns.as_bytes()));
        if let Some(ca) = &self.service_account_tokens.ca_pem {
            next["data"]["ca.crt"] = json!(base64_encode(ca.as_bytes()));
        }
        if !next
            .pointer("/metadata/annotations")
            .is_some_and(Value::is_object)
        {
            next["metadata"]["annotations"] = json!({});
        }
        next["metadata"]["annotations"][SERVICE_ACCOUNT_UID] = json!(sa_uid);
        self.commit(rt, ns, name, Some(next));
    }

    /// The ServiceAccount a legacy token stands for, while its Secret and ServiceAccount live.
    pub(crate) fn service_account_token_user(&self, token: &str) -> Option<UserInfo> {
        let (ns, name) = self.service_account_tokens.secret_of(token)?;
        let secret = self.lookup(SECRETS_KEY, ns, name)?;
        if deleting(secret)
            || token_of(secret).as_deref() != Some(token)
            || !self.service_account_tokens.verifies(token, uid_of(secret))
        {
            return None;
        }
        let sa_name = annotation(secret, SERVICE_ACCOUNT_NAME)?;
        let sa_uid = annotation(secret, SERVICE_ACCOUNT_UID)?;
        let sa = self.lookup(SERVICE_ACCOUNTS_KEY, ns, sa_name)?;
        (uid_of(sa) == sa_uid && !deleting(sa)).then(|| UserInfo::service_account(ns, sa_name))
    }
}
