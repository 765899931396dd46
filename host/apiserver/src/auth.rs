//! Authentication (only when `Options::rbac` is on): who sends a request.
//!
//! Owns: the token table (the admin token of [`crate::ApiServer::kubeconfig_yaml`], tokens
//! registered by [`crate::ApiServer::add_token`], and ServiceAccount tokens minted by
//! TokenRequest, bound to the ServiceAccount's uid and an expiry), the in-process marker that
//! makes [`crate::ApiServer::client`] the administrator, bearer-token and anonymous
//! authentication (`system:anonymous`, as a server with anonymous auth enabled), and
//! impersonation (`Impersonate-User` / `Impersonate-Group`, checked with the `impersonate` verb).
//!
//! Must not touch: authorization decisions (`rbac`), the store (the caller says whether a
//! ServiceAccount still exists), the tokens of legacy token Secrets (`tokens`), or HTTP routing.

use crate::rbac::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS, Attributes, UserInfo};
use crate::status::ApiError;
use http::HeaderMap;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The token of the kubeconfig [`crate::ApiServer::kubeconfig_yaml`] writes: the administrator.
pub const ADMIN_TOKEN: &str = "embedded-apiserver-accepts-any-token";

/// Request extension set by [`crate::ApiServer::client`]'s transport: the in-process client
/// is the administrator. Not constructible outside this crate, so HTTP cannot forge it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InProcessAdmin;

#[derive(Debug, Clone)]
enum Token {
    User(UserInfo),
    ServiceAccount {
        namespace: String,
        name: String,
        uid: String,
        expires: SystemTime,
    },
}

/// The token table.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    map: Mutex<HashMap<String, Token>>,
    /// The administrator's token when it is not [`ADMIN_TOKEN`] ([`crate::Options::admin_token`]).
    admin: Option<String>,
}

/// A bearer token that names a ServiceAccount: valid while that ServiceAccount (same uid) exists.
pub(crate) struct BoundServiceAccount<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

impl Tokens {
    /// A table whose administrator token is `admin` (`None`: the well-known [`ADMIN_TOKEN`]).
    pub(crate) fn with_admin(admin: Option<String>) -> Self {
        Tokens {
            map: Mutex::default(),
            admin: admin.filter(|t| !t.is_empty()),
        }
    }

    /// The administrator's bearer token.
    pub(crate) fn admin_token(&self) -> &str {
        self.admin.as_deref().unwrap_or(ADMIN_TOKEN)
    }

    pub(crate) fn add(&self, token: &str, user: UserInfo) {
        self.lock().insert(token.to_string(), Token::User(user));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Token>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new token for a ServiceAccount, valid for `ttl`; returns it and its expiry.
    pub(crate) fn mint(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        ttl: Duration,
    ) -> (String, SystemTime) {
        let token = format!(
            "eas.{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let expires = SystemTime::now() + ttl;
        self.lock().insert(
            token.clone(),
            Token::ServiceAccount {
                namespace: namespace.into(),
                name: name.into(),
                uid: uid.into(),
                expires,
            },
        );
        (token, expires)
    }

    /// The user a bearer token stands for (`None`: unknown, expired, or its ServiceAccount is
    /// gone — `sa_alive` answers that).
    pub(crate) fn user(
        &self,
        token: &str,
        sa_alive: impl FnOnce(BoundServiceAccount<'_>) -> bool,
    ) -> Option<UserInfo> {
        if token == self.admin_token() {
            return Some(UserInfo::admin());
        }
        let entry = self.lock().get(token).cloned()?;
        match entry {
            Token::User(u) => Some(u),
            Token::ServiceAccount {
                namespace,
                name,
                uid,
                expires,
            } => (SystemTime::now() < expires
                && sa_alive(BoundServiceAccount {
                    namespace: &namespace,
                    name: &name,
                    uid: &uid,
                }))
            .then(|| UserInfo::service_account(&namespace, &name)),
        }
    }
}

/// The 401 every failed authentication gets.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// The bearer token of a request, if it sends one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// An impersonation request: who to act as, and the checks it needs first.
pub(crate) struct Impersonation {
    pub user: UserInfo,
    /// One `impersonate` check per impersonated user/group/ServiceAccount.
    pub checks: Vec<Attributes>,
}

/// The `Impersonate-User` / `Impersonate-Group` headers of a request by `requester`, if any.
pub(crate) fn impersonation(
    requester: &UserInfo,
    headers: &HeaderMap,
) -> Result<Option<Impersonation>, ApiError> {
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let extra = headers
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-extra-") || k.as_str() == "impersonate-uid");
    let Some(name) = user else {
        if !groups.is_empty() || extra {
            return Err(ApiError::bad_request(
                "requested impersonation without a user (Impersonate-User header)",
            ));
        }
        return Ok(None);
    };
    let mut checks = Vec::new();
    let mut out_groups = groups.clone();
    match crate::rbac::split_service_account_user(&name) {
        Some((ns, sa)) => {
            checks.push(Attributes::resource(
                requester,
                "impersonate",
                "",
                "serviceaccounts",
                "",
                ns,
                sa,
            ));
            if groups.is_empty() {
                out_groups = vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                ];
            }
        }
        None => checks.push(Attributes::resource(
            requester,
            "impersonate",
            "",
            "users",
            "",
            "",
            &name,
        )),
    }
    for g in &groups {
        checks.push(Attributes::resource(
            requester,
            "impersonate",
            "",
            "groups",
            "",
            "",
            g,
        ));
    }
    let (all, other) = if name == ANONYMOUS {
        (ALL_UNAUTHENTICATED, ALL_AUTHENTICATED)
    } else {
        (ALL_AUTHENTICATED, ALL_UNAUTHENTICATED)
    };
    if !out_groups.iter().any(|g| g == all || g == other) {
        out_groups.push(all.to_string());
    }
    Ok(Some(Impersonation {
        user: UserInfo {
            name,
            groups: out_groups,
        },
        checks,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_users_until_they_expire_or_their_account_goes() {
        let t = Tokens::default();
        assert_eq!(t.user(ADMIN_TOKEN, |_| false), Some(UserInfo::admin()));
        assert_eq!(t.user("nope", |_| true), None);
        t.add("alice-token", UserInfo::new("alice", &["team"]));
        assert_eq!(t.user("alice-token", |_| false).unwrap().name, "alice");
        let (tok, _) = t.mint("ns", "sa", "uid-1", Duration::from_secs(600));
        let u = t.user(&tok, |b| b.uid == "uid-1").unwrap();
        assert_eq!(u.name, "system:serviceaccount:ns:sa");
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(t.user(&tok, |_| false), None, "account deleted");
        let (old, _) = t.mint("ns", "sa", "uid-1", Duration::ZERO);
        assert_eq!(t.user(&old, |_| true), None, "expired");
        let own = Tokens::with_admin(Some("s3cret".into()));
        assert_eq!(own.user("s3cret", |_| false), Some(UserInfo::admin()));
        assert_eq!(
            own.user(ADMIN_TOKEN, |_| false),
            None,
            "only the configured one"
        );
    }

    #[test]
    fn bearer_tokens_and_impersonation_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert("authorization", "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(
            "impersonate-user",
            "system:serviceaccount:ns:sa".parse().unwrap(),
        );
        let i = impersonation(&UserInfo::admin(), &h).unwrap().unwrap();
        assert_eq!(i.user, UserInfo::service_account("ns", "sa"));
        assert_eq!(i.checks[0].resource, "serviceaccounts");
        assert_eq!(i.checks[0].namespace, "ns");
        h.insert("impersonate-user", "bob".parse().unwrap());
        h.append("impersonate-group", "devs".parse().unwrap());
        let i = impersonation(&UserInfo::admin(), &h).unwrap().unwrap();
        assert_eq!(
            i.user,
            UserInfo::new("bob", &["devs", "system:authenticated"])
        );
        assert_eq!(i.checks.len(), 2);
        h.remove("impersonate-user");
        assert!(impersonation(&UserInfo::admin(), &h).is_err());
    }
}
