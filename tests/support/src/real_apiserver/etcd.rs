//! The etcd under a real test server, read and written directly: a snapshot of every key once a
//! server is prepared, and the restore that puts every key back to it, so that the server can
//! serve another story as if it had just been prepared.
//!
//! Through etcd's JSON gateway (`/v3/kv/range`, `/v3/kv/txn`), as kube-apiserver itself stores
//! objects: one key per object under `/registry/`. Keys the API server rewrites by itself (its
//! lease, the `kubernetes` endpoints) are left alone.
//!
//! Owns: reading and writing the keys. Must not touch: the server's processes (`real_apiserver`).

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

/// Keys kube-apiserver keeps up to date by itself: restoring them would only make it write them
/// again.
const OWNED_BY_THE_SERVER: &[&str] = &[
    "/registry/masterleases/",
    "/registry/leases/kube-system/",
    "/registry/services/endpoints/default/kubernetes",
];

/// etcd's limit on operations in one transaction (`--max-txn-ops`, default 128).
const OPS_PER_TXN: usize = 128;

/// Every key and its value when the server was prepared.
pub struct Snapshot {
    keys: HashMap<Vec<u8>, Vec<u8>>,
}

/// What a restore changed: per `/registry/<resource>/` prefix of a changed key, the revision at
/// which its last change was written (a watch cache of that resource is fresh once it has seen it).
pub type Changed = BTreeMap<String, i64>;

/// The etcd client URL a server's kube-apiserver uses (its `--etcd-servers`).
pub fn url_of(apiserver_pid: &str) -> Result<String, String> {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", apiserver_pid.trim()))
        .map_err(|e| format!("kube-apiserver's command line: {e}"))?;
    cmdline
        .split(|b| *b == 0)
        .filter_map(|arg| std::str::from_utf8(arg).ok())
        .find_map(|arg| arg.strip_prefix("--etcd-servers="))
        .map(|urls| urls.split(',').next().unwrap_or(urls).to_string())
        .ok_or_else(|| "kube-apiserver has no --etcd-servers".to_string())
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> Result<Value, String> {
    let response = http
        .post(url)
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("etcd {url}: {e}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| format!("etcd {url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("etcd {url}: {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("etcd {url}: {e}: {text}"))
}

fn decode(field: &Value) -> Vec<u8> {
    field
        .as_str()
        .and_then(|s| B64.decode(s).ok())
        .unwrap_or_default()
}

/// Every key with its value.
async fn all_keys(http: &reqwest::Client, etcd: &str) -> Result<HashMap<Vec<u8>, Vec<u8>>, String> {
    // From "\0" to the end of the key space.
    let all = B64.encode([0u8]);
    let answer = post(
        http,
        &format!("{etcd}/v3/kv/range"),
        json!({"key": all, "range_end": all}),
    )
    .await?;
    Ok(answer["kvs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|kv| (decode(&kv["key"]), decode(&kv["value"])))
        .collect())
}

pub async fn snapshot(http: &reqwest::Client, etcd: &str) -> Result<Snapshot, String> {
    Ok(Snapshot {
        keys: all_keys(http, etcd).await?,
    })
}

fn owned_by_the_server(key: &[u8]) -> bool {
    OWNED_BY_THE_SERVER
        .iter()
        .any(|p| key.starts_with(p.as_bytes()))
}

/// `/registry/<a>/<b>/` for a group's resource (`<a>` has a dot), else `/registry/<a>/`
/// (`/registry/services/specs/` and `/registry/services/endpoints/` keep both parts).
fn resource_prefix(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    let parts: Vec<&str> = key.trim_start_matches('/').split('/').collect();
    let two = parts.len() > 2 && (parts[1].contains('.') || parts[1] == "services");
    if two {
        format!("/{}/{}/{}/", parts[0], parts[1], parts[2])
    } else {
        format!("/{}/{}/", parts[0], parts.get(1).copied().unwrap_or(""))
    }
}

/// Puts every key back as it was in `snapshot`: keys written since are deleted, changed or
/// deleted ones are written again.
pub async fn restore(
    http: &reqwest::Client,
    etcd: &str,
    snapshot: &Snapshot,
) -> Result<Changed, String> {
    let now = all_keys(http, etcd).await?;
    let mut ops: Vec<(Vec<u8>, Value)> = Vec::new();
    for key in now.keys() {
        if !snapshot.keys.contains_key(key) && !owned_by_the_server(key) {
            ops.push((
                key.clone(),
                json!({"request_delete_range": {"key": B64.encode(key)}}),
            ));
        }
    }
    for (key, value) in &snapshot.keys {
        if now.get(key) != Some(value) && !owned_by_the_server(key) {
            ops.push((
                key.clone(),
                json!({"request_put": {"key": B64.encode(key), "value": B64.encode(value)}}),
            ));
        }
    }
    let mut changed = Changed::new();
    for chunk in ops.chunks(OPS_PER_TXN) {
        let success: Vec<&Value> = chunk.iter().map(|(_, op)| op).collect();
        let answer = post(
            http,
            &format!("{etcd}/v3/kv/txn"),
            json!({"success": success}),
        )
        .await?;
        let revision = answer["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| format!("etcd txn answered without a revision: {answer}"))?;
        for (key, _) in chunk {
            changed.insert(resource_prefix(key), revision);
        }
    }
    Ok(changed)
}
