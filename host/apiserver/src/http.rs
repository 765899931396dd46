//! Serving the API server: the axum router over `routes`, the in-process client, loopback,
//! TCP and TLS serving, the standalone `deployer-host apiserver` command and its kubeconfig.
//!
//! Owns: everything between a socket (or the in-process client) and [`routes`](crate::routes).
//! Must not touch: the store or API semantics (`server.rs`, `ops`).

use anyhow::Context;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;

use crate::server::{ApiServer, Options};
use crate::{auth, routes, tls};

impl ApiServer {
    /// The whole API as an axum router.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .fallback(routes::handle)
            .with_state(self.clone())
    }

    /// An in-process client (no socket), default namespace `default`. Needs a Tokio runtime.
    /// It is the administrator (`system:admin`, `system:masters`) when [`Options::rbac`] is on.
    pub fn client(&self) -> kube::Client {
        let svc = tower::ServiceBuilder::new()
            .map_request(|mut req: http::Request<kube::client::Body>| {
                req.extensions_mut().insert(auth::InProcessAdmin);
                req
            })
            .service(self.router());
        kube::Client::new(svc, "default")
    }

    /// An in-process client that sends `Authorization: Bearer <token>` (acts as whoever the
    /// token names when [`Options::rbac`] is on). Needs a Tokio runtime.
    pub fn client_with_token(&self, token: &str) -> kube::Client {
        let value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .unwrap_or_else(|_| http::HeaderValue::from_static("Bearer invalid"));
        let svc = tower::ServiceBuilder::new()
            .map_request(move |mut req: http::Request<kube::client::Body>| {
                req.headers_mut()
                    .insert(http::header::AUTHORIZATION, value.clone());
                req
            })
            .service(self.router());
        kube::Client::new(svc, "default")
    }

    /// Serve HTTP on `listener` until `shutdown` completes; open watch streams are then closed.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        use axum::serve::ListenerExt;
        // As Go's net/http (and so kube-apiserver) does: small responses are not held back
        // for the client's delayed ACK.
        self.publish_kubernetes_service(listener.local_addr()?)?;
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        self.serve_on(listener, shutdown).await
    }

    /// Serves HTTP on a free loopback port from a background task, as processes outside this
    /// one (a deployer, Helm, kubectl, Landscaper) reach a cluster; serving stops when the
    /// returned [`LoopbackServing`] is dropped. Needs a Tokio runtime.
    pub async fn serve_on_loopback(&self) -> std::io::Result<LoopbackServing> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = self.clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(e) = server.serve(listener, shutdown).await {
                tracing::warn!(error = %e, "loopback serving ended");
            }
        });
        Ok(LoopbackServing {
            url,
            ca_pem: None,
            stop: Some(stop),
        })
    }

    /// [`serve_on_loopback`](Self::serve_on_loopback) over HTTPS with a certificate generated
    /// for 127.0.0.1 by a CA of its own ([`LoopbackServing::ca_pem`]): for clients that reach
    /// the API as a pod does (a token, the CA, `KUBERNETES_SERVICE_HOST/PORT`).
    pub async fn serve_tls_on_loopback(&self) -> anyhow::Result<LoopbackServing> {
        let cert = tls::ServingCert::generate(&[])?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("https://{}", listener.local_addr()?);
        let ca_pem = cert.ca_pem().to_string();
        self.set_service_account_ca(&ca_pem);
        self.publish_kubernetes_service(listener.local_addr()?)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = self.clone();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(e) = server.serve_tls(listener, &cert, shutdown).await {
                tracing::warn!(error = %e, "loopback serving ended");
            }
        });
        Ok(LoopbackServing {
            url,
            ca_pem: Some(ca_pem),
            stop: Some(stop),
        })
    }

    /// [`serve`](Self::serve) over HTTPS with `cert` (e.g. [`tls::ServingCert::generate`]);
    /// clients trust [`tls::ServingCert::ca_pem`] (see [`ApiServer::kubeconfig_yaml_tls`]).
    pub async fn serve_tls(
        &self,
        listener: tokio::net::TcpListener,
        cert: &tls::ServingCert,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        self.set_service_account_ca(cert.ca_pem());
        self.publish_kubernetes_service(listener.local_addr()?)?;
        let listener = tls::TlsListener::new(listener, cert.server_config()?)?;
        self.serve_on(listener, shutdown).await
    }

    /// Publishes where the API is served as kube-apiserver does: the Service `default/kubernetes`
    /// (cluster IP `10.96.0.1`, one port named `https`) and its Endpoints. Unlike kube-apiserver,
    /// whose Service listens on 443 and forwards to the secure port, the Service's port is the
    /// port the server listens on, so a client that resolves `kubernetes.default` to the server's
    /// host reaches the API at `<scheme>://kubernetes.default:<service port>` (Landscaper's
    /// integration tests build their Targets that way). Serving again on another address moves
    /// both (a persisted pair from an earlier run included). [`serve`](Self::serve) and
    /// [`serve_tls`](Self::serve_tls) call it; call it before spawning them to have it in place
    /// before the first request.
    pub fn publish_kubernetes_service(&self, addr: std::net::SocketAddr) -> anyhow::Result<()> {
        let port = addr.port();
        let ip = match addr.ip() {
            ip if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.to_string(),
            ip => ip.to_string(),
        };
        let published = {
            let g = self.shared.store.lock();
            let svc_port = g
                .lookup("/services", "default", "kubernetes")
                .and_then(|svc| svc.pointer("/spec/ports/0/port").and_then(Value::as_u64));
            let ep_ip = g
                .lookup("/endpoints", "default", "kubernetes")
                .and_then(|ep| {
                    ep.pointer("/subsets/0/addresses/0/ip")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                });
            svc_port == Some(u64::from(port)) && ep_ip.as_deref() == Some(ip.as_str())
        };
        if published {
            return Ok(());
        }
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        self.install_object(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.96.0.1",
                "ports": [{"name": "https", "port": port, "protocol": "TCP", "targetPort": port}],
            }
        }))
        .context("publishing Service default/kubernetes")?;
        self.install_object(json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
            "subsets": [{
                "addresses": [{"ip": ip}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            }]
        }))
        .context("publishing Endpoints default/kubernetes")?;
        Ok(())
    }

    async fn serve_on<L>(
        &self,
        listener: L,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()>
    where
        L: axum::serve::Listener,
        L::Addr: std::fmt::Debug,
    {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let me = ApiServer {
            shared: self.shared.clone(),
            stop: Some(rx),
        };
        axum::serve(listener, me.router())
            .with_graceful_shutdown(async move {
                shutdown.await;
                let _ = tx.send(true);
            })
            .await
            .context("serving HTTP")
    }

    /// A kubeconfig (cluster, user and context all named `embedded`) with the admin token
    /// ([`auth::ADMIN_TOKEN`]; any token is accepted unless [`Options::rbac`] is on).
    pub fn kubeconfig_yaml(server_url: &str) -> String {
        Self::kubeconfig_yaml_tls(server_url, None, auth::ADMIN_TOKEN)
    }

    /// A kubeconfig like [`kubeconfig_yaml`](Self::kubeconfig_yaml) with `token` and, for an
    /// `https://` server, the CA to trust (`certificate-authority-data`, base64 of the PEM).
    pub fn kubeconfig_yaml_tls(server_url: &str, ca_pem: Option<&str>, token: &str) -> String {
        use base64::Engine as _;
        let ca = ca_pem
            .map(|pem| {
                format!(
                    "    certificate-authority-data: {}\n",
                    base64::engine::general_purpose::STANDARD.encode(pem)
                )
            })
            .unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: embedded\n  cluster:\n    server: {server_url}\n{ca}users:\n- name: embedded\n  user:\n    token: {token}\ncontexts:\n- name: embedded\n  context:\n    cluster: embedded\n    user: embedded\n    namespace: default\ncurrent-context: embedded\npreferences: {{}}\n"
        )
    }
}

/// `deployer-host apiserver`: bind, write the kubeconfig, print `ready <url>`,
/// serve until SIGINT/SIGTERM, flush, return.
pub async fn run_standalone(
    listen: SocketAddr,
    kubeconfig_out: &Path,
    options: Options,
) -> anyhow::Result<()> {
    let shutdown = async {
        #[cfg(unix)]
        {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    };
    run_standalone_until(listen, kubeconfig_out, options, shutdown).await
}

/// [`run_standalone`] with an explicit shutdown future instead of signals.
pub async fn run_standalone_until(
    listen: SocketAddr,
    kubeconfig_out: &Path,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    options
        .faults
        .validate()
        .map_err(|e| anyhow::anyhow!("fault injection: {e}"))?;
    let https = options.tls;
    let server = ApiServer::new(options)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let mut addr = listener.local_addr()?;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let cert = https
        .then(|| tls::ServingCert::generate(&[listen.ip().to_string()]))
        .transpose()?;
    let url = format!("{}://{addr}", if https { "https" } else { "http" });
    server.publish_kubernetes_service(listener.local_addr()?)?;
    write_kubeconfig(
        kubeconfig_out,
        &url,
        cert.as_ref().map(tls::ServingCert::ca_pem),
        server.admin_token(),
    )?;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready {url}")?;
        out.flush()?;
    }
    match &cert {
        Some(cert) => server.serve_tls(listener, cert, shutdown).await?,
        None => server.serve(listener, shutdown).await?,
    }
    server.flush().await?;
    Ok(())
}

/// Writes the kubeconfig for `url` (creating its directory) with the admin `token`; with a CA
/// (HTTPS), also writes the CA as `ca.crt` beside it.
pub fn write_kubeconfig(
    path: &Path,
    url: &str,
    ca_pem: Option<&str>,
    token: &str,
) -> anyhow::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = dir {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if let Some(pem) = ca_pem {
        let ca = dir.unwrap_or(Path::new(".")).join("ca.crt");
        std::fs::write(&ca, pem).with_context(|| format!("writing {}", ca.display()))?;
    }
    std::fs::write(path, ApiServer::kubeconfig_yaml_tls(url, ca_pem, token))
        .with_context(|| format!("writing {}", path.display()))
}

/// The embedded server served on a loopback port ([`ApiServer::serve_on_loopback`]); serving
/// stops when this is dropped.
pub struct LoopbackServing {
    /// `http://127.0.0.1:<port>` (`https://` from [`ApiServer::serve_tls_on_loopback`]).
    pub url: String,
    /// The CA clients trust (HTTPS only).
    ca_pem: Option<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl LoopbackServing {
    /// An admin kubeconfig for [`Self::url`] (with the CA to trust over HTTPS).
    pub fn kubeconfig(&self) -> String {
        ApiServer::kubeconfig_yaml_tls(&self.url, self.ca_pem.as_deref(), auth::ADMIN_TOKEN)
    }

    /// The CA clients trust, when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The port served on.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a loopback URL ends in its port")
    }
}

impl Drop for LoopbackServing {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
