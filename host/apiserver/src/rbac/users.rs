//! Who asks: the authenticated identity and Kubernetes' well-known users and groups.
//!
//! Owns: [`UserInfo`] and the service-account user names. Must not touch: authentication
//! (`auth` decides who the user is) or authorization.

/// Group every member of is allowed everything (Kubernetes' privileged group).
pub const SYSTEM_MASTERS: &str = "system:masters";
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
pub const ANONYMOUS: &str = "system:anonymous";

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    /// The cluster administrator (`system:admin`, `system:masters`).
    pub fn admin() -> Self {
        Self::new("system:admin", &[SYSTEM_MASTERS, ALL_AUTHENTICATED])
    }

    /// A request without credentials.
    pub fn anonymous() -> Self {
        Self::new(ANONYMOUS, &[ALL_UNAUTHENTICATED])
    }

    /// `system:serviceaccount:{ns}:{name}` with its groups.
    pub fn service_account(ns: &str, name: &str) -> Self {
        UserInfo {
            name: service_account_user(ns, name),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                ALL_AUTHENTICATED.into(),
            ],
        }
    }

    pub fn in_group(&self, g: &str) -> bool {
        self.groups.iter().any(|x| x == g)
    }
}

pub fn service_account_user(ns: &str, name: &str) -> String {
    format!("system:serviceaccount:{ns}:{name}")
}

/// `(namespace, name)` of a `system:serviceaccount:{ns}:{name}` user name.
pub fn split_service_account_user(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}
