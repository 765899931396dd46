//! The host's allowlist of download locations (`fetch.allow`): `*`; a URL prefix (an entry with
//! a scheme); or `host[:port][/path]`, where an entry without port matches any port and a path
//! must prefix the request's path.
//!
//! Owns: the rule. Must not touch: where the list comes from (the host configuration).

/// Whether `location` (a URL, or an OCI reference without scheme) is allowed by `allow`.
pub fn allowed(allow: &[String], location: &str) -> bool {
    let (scheme, rest) = match location.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, location),
    };
    let (host_port, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    // No credentials in a URL may smuggle another host past the check.
    if host_port.contains('@') {
        return false;
    }
    allow.iter().any(|entry| {
        let entry = entry.trim();
        if entry == "*" {
            return true;
        }
        if entry.contains("://") {
            return scheme.is_some() && location.starts_with(entry);
        }
        let (e_host, e_path) = match entry.find('/') {
            Some(i) => (&entry[..i], &entry[i..]),
            None => (entry, ""),
        };
        let host_ok = if e_host.contains(':') {
            e_host.eq_ignore_ascii_case(host_port)
        } else {
            e_host.eq_ignore_ascii_case(host_without_port(host_port))
        };
        host_ok && (e_path.is_empty() || path.starts_with(e_path))
    })
}

/// `host` without a trailing `:port`.
pub fn host_without_port(host: &str) -> &str {
    match host.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(entries: &[&str], location: &str) -> bool {
        allowed(
            &entries.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            location,
        )
    }

    #[test]
    fn the_allowlist_takes_prefixes_hosts_ports_and_paths() {
        assert!(!allow(&[], "https://charts.example.com/a.tgz"));
        assert!(allow(&["*"], "registry.example.com/x:1"));
        assert!(allow(
            &["https://charts.example.com/stable/"],
            "https://charts.example.com/stable/a.tgz"
        ));
        assert!(!allow(
            &["https://charts.example.com/stable/"],
            "https://charts.example.com/other/a.tgz"
        ));
        assert!(!allow(
            &["https://charts.example.com"],
            "http://charts.example.com/a.tgz"
        ));
        assert!(allow(&["127.0.0.1"], "http://127.0.0.1:5000/index.yaml"));
        assert!(allow(&["127.0.0.1"], "127.0.0.1:5000/charts/nginx:1.0.0"));
        assert!(allow(&["127.0.0.1:5000"], "127.0.0.1:5000/charts/nginx:1"));
        assert!(!allow(&["127.0.0.1:5000"], "127.0.0.1:5001/charts/nginx:1"));
        assert!(allow(&["reg.io/charts/"], "reg.io/charts/nginx:1"));
        assert!(!allow(&["reg.io/charts/"], "reg.io/other/nginx:1"));
        assert!(!allow(&["reg.io"], "evil.io/reg.io/x:1"));
        assert!(!allow(&["127.0.0.1"], "http://127.0.0.1@evil.io/x"));
    }
}
