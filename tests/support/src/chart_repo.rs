//! Helm charts for the helm deployer's stories: packaging a chart directory into a `.tgz`
//! (as `helm package` lays it out), and a classic chart repository (`index.yaml` + archives)
//! served over HTTP on a free loopback port, which counts its requests and can demand an
//! `Authorization` header. Stops when dropped.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::Digest as _;

/// The chart directory `tests/helm/charts/<name>`.
pub fn chart_dir(name: &str) -> std::path::PathBuf {
    crate::workspace().join("tests/helm/charts").join(name)
}

/// `helm package` of `dir` with `version` written into Chart.yaml: a gzip tar with one top
/// directory named after the chart.
pub fn package(dir: &Path, version: &str) -> Vec<u8> {
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |path: &Path, rel: &str| {
        let mut data = std::fs::read(path).unwrap();
        if rel == "Chart.yaml" {
            let text = String::from_utf8(data).unwrap();
            data = text
                .lines()
                .map(|l| {
                    if l.starts_with("version:") {
                        format!("version: {version}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes();
            data.push(b'\n');
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("{name}/{rel}"), data.as_slice())
            .unwrap();
    };
    let mut stack = vec![dir.to_path_buf()];
    let mut files = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    for f in files {
        let rel = f.strip_prefix(dir).unwrap().to_string_lossy().to_string();
        add(&f, &rel);
    }
    let tar = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

/// `base64` of `package(dir, version)`: a `chart.archive.raw`.
pub fn archive_raw(name: &str, version: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(package(&chart_dir(name), version))
}

/// A chart repository on 127.0.0.1.
pub struct ChartRepo {
    /// `http://127.0.0.1:<port>` (`https://` from [`ChartRepo::start_tls`])
    pub url: String,
    hits: Arc<Mutex<BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ChartRepo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChartRepo {
    /// Serves `charts` (name, version, archive) with an `index.yaml` as `helm repo index`
    /// writes it (relative URLs, sha256 digests). With `auth`, every request must carry
    /// `Authorization: <auth>` (401 otherwise).
    pub async fn start(charts: Vec<(&str, &str, Vec<u8>)>, auth: Option<String>) -> ChartRepo {
        Self::serve(charts, auth, None).await
    }

    /// [`ChartRepo::start`] over HTTPS with `cert`'s serving certificate (signed by the test's
    /// own CA): `url` is `https://127.0.0.1:<port>`.
    pub async fn start_tls(
        charts: Vec<(&str, &str, Vec<u8>)>,
        auth: Option<String>,
        cert: &embedded_apiserver::tls::ServingCert,
    ) -> ChartRepo {
        Self::serve(charts, auth, Some(cert)).await
    }

    async fn serve(
        charts: Vec<(&str, &str, Vec<u8>)>,
        auth: Option<String>,
        tls: Option<&embedded_apiserver::tls::ServingCert>,
    ) -> ChartRepo {
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut index = String::from("apiVersion: v1\nentries:\n");
        let mut by_name: BTreeMap<&str, Vec<(&str, String, String)>> = BTreeMap::new();
        for (name, version, data) in &charts {
            let file = format!("{name}-{version}.tgz");
            let digest = hex::encode(sha2::Sha256::digest(data));
            by_name
                .entry(name)
                .or_default()
                .push((version, file.clone(), digest));
            files.insert(format!("/{file}"), data.clone());
        }
        for (name, versions) in by_name {
            index.push_str(&format!("  {name}:\n"));
            for (version, file, digest) in versions {
                index.push_str(&format!(
                    "    - apiVersion: v2\n      name: {name}\n      version: {version}\n      digest: {digest}\n      urls:\n        - {file}\n"
                ));
            }
        }
        index.push_str("generated: \"2026-11-25T00:00:00Z\"\n");
        files.insert("/index.yaml".into(), index.into_bytes());

        let hits: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{}", listener.local_addr().unwrap());
        let files = Arc::new(files);
        let counted = hits.clone();
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let files = files.clone();
            let hits = counted.clone();
            let auth = auth.clone();
            async move {
                use axum::http::StatusCode;
                let path = req.uri().path().to_string();
                *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
                if let Some(want) = &auth {
                    let got = req
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok());
                    if got != Some(want.as_str()) {
                        return (StatusCode::UNAUTHORIZED, Vec::new());
                    }
                }
                match files.get(&path) {
                    Some(data) => (StatusCode::OK, data.clone()),
                    None => (StatusCode::NOT_FOUND, Vec::new()),
                }
            }
        });
        let task = match tls {
            None => tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            }),
            Some(cert) => {
                let listener = embedded_apiserver::tls::TlsListener::new(
                    listener,
                    cert.server_config().unwrap(),
                )
                .unwrap();
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).await;
                })
            }
        };
        ChartRepo { url, hits, task }
    }

    /// How often `path` (e.g. `/web-0.1.0.tgz`) was requested.
    pub fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}
