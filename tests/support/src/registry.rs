//! Debian's `docker-registry` for stories that push and pull OCI artifacts (plugins, the
//! host's image): on a free loopback port, stopped when dropped. Missing: SKIP locally, a
//! failure with `CI=true`.

use std::time::Duration;

/// Debian's `docker-registry` on a free loopback port, stopped on drop.
pub struct Registry {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    /// `127.0.0.1:<port>` (plain HTTP, or HTTPS from [`start_registry_tls`]).
    pub addr: String,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_registry() -> Option<Registry> {
    start("127.0.0.1", None, None)
}

/// A registry that speaks only HTTPS, with `cert`'s serving certificate (signed by the test's
/// own CA, valid for 127.0.0.1), and needs no credentials.
pub fn start_registry_tls_anonymous(
    cert: &embedded_apiserver::tls::ServingCert,
) -> Option<Registry> {
    start("127.0.0.1", None, Some(cert))
}

/// An authenticating registry (as [`start_registry_with_auth`]) that speaks only HTTPS, with
/// `cert`'s serving certificate (signed by the test's own CA, valid for 127.0.0.1).
pub fn start_registry_tls(
    user: &str,
    password: &str,
    cert: &embedded_apiserver::tls::ServingCert,
) -> Option<Registry> {
    start("127.0.0.1", Some((user, password)), Some(cert))
}

/// [`start_registry_tls`] listening on `ip` (one of the machine's own addresses, in `cert`'s
/// names): for clients that speak plain HTTP to every loopback registry whatever it serves
/// (containerd's resolver, and so Helm's registry client, do).
pub fn start_registry_tls_on(
    ip: &str,
    user: &str,
    password: &str,
    cert: &embedded_apiserver::tls::ServingCert,
) -> Option<Registry> {
    start(ip, Some((user, password)), Some(cert))
}

/// Like [`start_registry`], but every request needs HTTP basic authentication as `user` with
/// `password` (an htpasswd file with a bcrypt hash, as `docker-registry` wants it).
pub fn start_registry_with_auth(user: &str, password: &str) -> Option<Registry> {
    start("127.0.0.1", Some((user, password)), None)
}

fn start(
    ip: &str,
    auth: Option<(&str, &str)>,
    tls: Option<&embedded_apiserver::tls::ServingCert>,
) -> Option<Registry> {
    let bin = ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(bin) = bin else {
        assert!(
            std::env::var("CI").is_err(),
            "docker-registry is missing (apt install docker-registry)"
        );
        eprintln!("SKIP: docker-registry is not installed");
        return None;
    };
    let port = std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    let auth = match auth {
        None => String::new(),
        Some((user, password)) => {
            let htpasswd = dir.path().join("htpasswd");
            let hash = bcrypt::hash_with_salt(password.as_bytes(), 4, [7u8; 16])
                .unwrap()
                .format_for_version(bcrypt::Version::TwoY);
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
            format!(
                "auth: {{htpasswd: {{realm: test-registry, path: {}}}}}\n",
                htpasswd.display()
            )
        }
    };
    let tls = match tls {
        None => String::new(),
        Some(cert) => {
            let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
            std::fs::write(&crt, cert.cert_pem()).unwrap();
            std::fs::write(&key, cert.key_pem()).unwrap();
            format!(
                ", tls: {{certificate: {}, key: {}}}",
                crt.display(),
                key.display()
            )
        }
    };
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog: {{level: error}}\nstorage: {{filesystem: {{rootdirectory: {}}}, delete: {{enabled: true}}}}\nhttp: {{addr: {ip}:{port}{tls}}}\n{auth}",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new(bin)
        .arg("serve")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("{ip}:{port}");
    // Owned from here on: dropped (killed and reaped) on every path.
    let registry = Registry {
        child,
        _dir: dir,
        addr: addr.clone(),
    };
    for _ in 0..100 {
        if std::net::TcpStream::connect(&addr).is_ok() {
            return Some(registry);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("docker-registry did not start on {addr}");
}
