//! Helm's release records, byte-compatible with the Secret storage driver of Helm v3 and v4
//! (`pkg/release/v1`, `pkg/storage/driver/secrets.go`, `pkg/storage/storage.go`): real Helm
//! can list, get, upgrade, roll back and uninstall what this plugin installed, and the plugin
//! can do the same with what real Helm installed.
//!
//! Format (what Helm writes):
//! * one Secret per revision, `sh.helm.release.v1.<name>.v<revision>` in the release
//!   namespace, `type: helm.sh/release.v1`, one data key `release`;
//! * labels `name`, `owner=helm`, `status`, `version`, `createdAt` (create) / `modifiedAt`
//!   (update) in Unix seconds, plus the release's own labels;
//! * the value of `release`: the release as JSON → gzip (best compression) → standard base64;
//!   that text is the Secret's *bytes*, so in the API object it is base64-encoded once more.
//!   Readers skip gunzip when the gzip magic `1f 8b 08` is absent (records older than
//!   compression).
//!
//! The JSON follows Helm's field names. Times are Go `time.Time` JSON (RFC 3339 with
//! nanoseconds, written in UTC here); a zero time is written as `""` as Helm 3 does (Helm 4
//! omits it and reads `""` back as zero). Everything this module does not model — Helm 4's
//! `info.rollback_revision`, `info.resources`, a hook's `output_log_policies`, any future
//! field — is kept in `extra` maps, so a read-modify-write (marking a release superseded)
//! loses nothing. The chart is kept as raw JSON for the same reason.
//!
//! Owns: the release data model, its encoding, the Secret form and [`Storage`] (history,
//! create/update/delete, `MaxHistory` pruning). Must not touch: what a release deploys (see
//! [`crate::actions`]).

use std::collections::BTreeMap;
use std::io::{Read, Write};

use base64::Engine as _;
use sdk_guest::{Ctx, DeployerError, ObjectRef};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// Prefix of release Secret names (`storage.HelmStorageType`).
pub const STORAGE_TYPE: &str = "sh.helm.release.v1";
/// `type` of release Secrets.
pub const SECRET_TYPE: &str = "helm.sh/release.v1";
/// Labels Helm owns on a release Secret (`driver.GetSystemLabels`).
pub const SYSTEM_LABELS: [&str; 6] = [
    "name",
    "owner",
    "status",
    "version",
    "createdAt",
    "modifiedAt",
];

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Name of the Secret of `name` at `version` (`storage.makeKey`).
pub fn secret_name(name: &str, version: i64) -> String {
    format!("{STORAGE_TYPE}.{name}.v{version}")
}

/// The state of a release revision (`release.Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Status {
    /// `unknown`
    #[default]
    Unknown,
    /// `deployed`: the one revision that is live.
    Deployed,
    /// `uninstalled`
    Uninstalled,
    /// `superseded`: an older revision.
    Superseded,
    /// `failed`
    Failed,
    /// `uninstalling`
    Uninstalling,
    /// `pending-install`
    PendingInstall,
    /// `pending-upgrade`
    PendingUpgrade,
    /// `pending-rollback`
    PendingRollback,
}

impl Status {
    /// Helm's string.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Unknown => "unknown",
            Status::Deployed => "deployed",
            Status::Uninstalled => "uninstalled",
            Status::Superseded => "superseded",
            Status::Failed => "failed",
            Status::Uninstalling => "uninstalling",
            Status::PendingInstall => "pending-install",
            Status::PendingUpgrade => "pending-upgrade",
            Status::PendingRollback => "pending-rollback",
        }
    }

    /// Parses Helm's string; anything else (including `""`) is `unknown`.
    pub fn parse(s: &str) -> Status {
        match s {
            "deployed" => Status::Deployed,
            "uninstalled" => Status::Uninstalled,
            "superseded" => Status::Superseded,
            "failed" => Status::Failed,
            "uninstalling" => Status::Uninstalling,
            "pending-install" => Status::PendingInstall,
            "pending-upgrade" => Status::PendingUpgrade,
            "pending-rollback" => Status::PendingRollback,
            _ => Status::Unknown,
        }
    }

    /// An install, upgrade or rollback is under way (`Status.IsPending`).
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            Status::PendingInstall | Status::PendingUpgrade | Status::PendingRollback
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        Ok(Status::parse(s.as_deref().unwrap_or("")))
    }
}

/// A Go `time.Time` field: `null` and a missing field read as the zero time (`""`).
fn time_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn is_null_or_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// `release.Info`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// When the release was first deployed (Go time JSON, `""` for zero).
    #[serde(default, deserialize_with = "time_string")]
    pub first_deployed: String,
    /// When this revision was deployed.
    #[serde(default, deserialize_with = "time_string")]
    pub last_deployed: String,
    /// When the release was deleted.
    #[serde(default, deserialize_with = "time_string")]
    pub deleted: String,
    /// Human-readable log entry ("Install complete", "Upgrade complete", …).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub description: String,
    /// Status.
    #[serde(default)]
    pub status: Status,
    /// Rendered `NOTES.txt`.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub notes: String,
    /// Fields not modelled here (`resources`, Helm 4's `rollback_revision`, …), kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `release.HookExecution`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookExecution {
    /// Start time (Go time JSON, `""` for zero).
    #[serde(default, deserialize_with = "time_string")]
    pub started_at: String,
    /// Completion time.
    #[serde(default, deserialize_with = "time_string")]
    pub completed_at: String,
    /// `Unknown`, `Running`, `Succeeded`, `Failed` (or `""` if never run).
    #[serde(default, deserialize_with = "null_as_default")]
    pub phase: String,
}

/// `release.Hook`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    /// Object name.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub name: String,
    /// Kind.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub kind: String,
    /// Template path.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub path: String,
    /// The document.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub manifest: String,
    /// `pre-install`, `post-upgrade`, …
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub events: Vec<String>,
    /// The last execution.
    #[serde(default, deserialize_with = "null_as_default")]
    pub last_run: HookExecution,
    /// `helm.sh/hook-weight`.
    #[serde(
        default,
        skip_serializing_if = "is_zero",
        deserialize_with = "null_as_default"
    )]
    pub weight: i64,
    /// `helm.sh/hook-delete-policy`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub delete_policies: Vec<String>,
    /// Fields not modelled here (`output_log_policies`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Hook {
    /// A hook as rendered (never run).
    pub fn from_rendered(h: &helm_engine::sort::Hook) -> Hook {
        Hook {
            name: h.name.clone(),
            kind: h.kind.clone(),
            path: h.path.clone(),
            manifest: h.manifest.clone(),
            events: h.events.clone(),
            last_run: HookExecution::default(),
            weight: h.weight,
            delete_policies: h.delete_policies.clone(),
            extra: Map::new(),
        }
    }
}

/// `release.Release`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Release {
    /// Release name.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub name: String,
    /// Info.
    #[serde(default, deserialize_with = "null_as_default")]
    pub info: Info,
    /// The chart (Helm's `chart.Chart` JSON, see [`chart_json`]); kept as read.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub chart: Value,
    /// The user-supplied values.
    #[serde(default, skip_serializing_if = "is_null_or_empty")]
    pub config: Value,
    /// The rendered manifest stream.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub manifest: String,
    /// Hooks.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub hooks: Vec<Hook>,
    /// Revision.
    #[serde(
        default,
        skip_serializing_if = "is_zero",
        deserialize_with = "null_as_default"
    )]
    pub version: i64,
    /// Namespace.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub namespace: String,
    /// Helm 4: `ssa` (server-side apply) or `csa`; empty for Helm 3.
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub apply_method: String,
    /// The release's own labels (stored as Secret labels, not in the JSON).
    #[serde(skip)]
    pub labels: BTreeMap<String, String>,
    /// Fields not modelled here, kept as read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Release {
    /// `SetStatus`.
    pub fn set_status(&mut self, status: Status, description: impl Into<String>) {
        self.info.status = status;
        self.info.description = description.into();
    }

    /// Name of this revision's Secret.
    pub fn secret_name(&self) -> String {
        secret_name(&self.name, self.version)
    }

    /// The chart's `name-version` (`helm list`'s CHART column).
    pub fn chart_ref(&self) -> String {
        let md = &self.chart["metadata"];
        format!(
            "{}-{}",
            md["name"].as_str().unwrap_or_default(),
            md["version"].as_str().unwrap_or_default()
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Time

/// Go's `time.Time` JSON text (RFC 3339 with nanoseconds, trailing zeros trimmed) of a Unix
/// time in milliseconds, in UTC.
pub fn go_time(unix_millis: u64) -> String {
    let secs = (unix_millis / 1000) as i64;
    let millis = unix_millis % 1000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut s = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    if millis != 0 {
        let frac = format!("{millis:03}");
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// Howard Hinnant's `civil_from_days`.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

// ---------------------------------------------------------------------------------------------
// Chart JSON

fn b64_or_null(data: Option<&[u8]>) -> Value {
    data.map(|d| Value::String(B64.encode(d)))
        .unwrap_or(Value::Null)
}

fn files_json(files: &[helm_engine::chart::File]) -> Value {
    if files.is_empty() {
        return Value::Null;
    }
    Value::Array(
        files
            .iter()
            .map(|f| json!({"name": f.name, "data": B64.encode(&f.data)}))
            .collect(),
    )
}

fn insert_str(m: &mut Map<String, Value>, key: &str, v: &str) {
    if !v.is_empty() {
        m.insert(key.into(), Value::String(v.into()));
    }
}

fn insert_strs(m: &mut Map<String, Value>, key: &str, v: &[String]) {
    if !v.is_empty() {
        m.insert(key.into(), json!(v));
    }
}

pub(crate) fn metadata_json(md: &helm_engine::chart::Metadata) -> Value {
    let mut m = Map::new();
    insert_str(&mut m, "name", &md.name);
    insert_str(&mut m, "home", &md.home);
    insert_strs(&mut m, "sources", &md.sources);
    insert_str(&mut m, "version", &md.version);
    insert_str(&mut m, "description", &md.description);
    insert_strs(&mut m, "keywords", &md.keywords);
    if !md.maintainers.is_empty() {
        let list: Vec<Value> = md
            .maintainers
            .iter()
            .map(|x| {
                let mut mm = Map::new();
                insert_str(&mut mm, "name", &x.name);
                insert_str(&mut mm, "email", &x.email);
                insert_str(&mut mm, "url", &x.url);
                Value::Object(mm)
            })
            .collect();
        m.insert("maintainers".into(), Value::Array(list));
    }
    insert_str(&mut m, "icon", &md.icon);
    insert_str(&mut m, "apiVersion", &md.api_version);
    insert_str(&mut m, "condition", &md.condition);
    insert_str(&mut m, "tags", &md.tags);
    insert_str(&mut m, "appVersion", &md.app_version);
    if md.deprecated {
        m.insert("deprecated".into(), Value::Bool(true));
    }
    if !md.annotations.is_empty() {
        m.insert("annotations".into(), json!(md.annotations));
    }
    insert_str(&mut m, "kubeVersion", &md.kube_version);
    if !md.dependencies.is_empty() {
        let deps: Vec<Value> = md
            .dependencies
            .iter()
            .map(|d| {
                let mut dm = Map::new();
                dm.insert("name".into(), Value::String(d.name.clone()));
                insert_str(&mut dm, "version", &d.version);
                dm.insert("repository".into(), Value::String(d.repository.clone()));
                insert_str(&mut dm, "condition", &d.condition);
                insert_strs(&mut dm, "tags", &d.tags);
                if d.enabled {
                    dm.insert("enabled".into(), Value::Bool(true));
                }
                if !d.import_values.is_empty() {
                    let iv: Vec<Value> = d
                        .import_values
                        .iter()
                        .map(|i| match i {
                            helm_engine::chart::ImportValue::Name(n) => json!(n),
                            helm_engine::chart::ImportValue::Map { child, parent } => {
                                json!({"child": child, "parent": parent})
                            }
                        })
                        .collect();
                    dm.insert("import-values".into(), Value::Array(iv));
                }
                insert_str(&mut dm, "alias", &d.alias);
                Value::Object(dm)
            })
            .collect();
        m.insert("dependencies".into(), Value::Array(deps));
    }
    insert_str(&mut m, "type", &md.chart_type);
    Value::Object(m)
}

/// Helm's `chart.Chart` JSON: `metadata` (Chart.yaml with Helm's JSON tags), `lock`,
/// `templates[{name, data}]`, `values` (parsed `values.yaml`), `schema` and `files[{name,
/// data}]`, bytes as standard base64, absent parts `null`. Subcharts are not part of it
/// (Helm's `dependencies` field is unexported), and neither is `Chart.lock` (the loader does
/// not keep it), so `lock` is `null`.
pub fn chart_json(chart: &helm_engine::Chart) -> Value {
    let values = chart
        .values
        .as_ref()
        .map(
            |v| match helm_engine::yaml::parse(&String::from_utf8_lossy(v)) {
                Ok(helm_engine::value::Value::Nil) => json!({}),
                Ok(parsed) => helm_engine::json::to_serde(&parsed),
                Err(_) => json!({}),
            },
        )
        .unwrap_or(Value::Null);
    json!({
        "metadata": metadata_json(&chart.metadata),
        "lock": null,
        "templates": files_json(&chart.templates),
        "values": values,
        "schema": b64_or_null(chart.schema.as_deref()),
        "files": files_json(&chart.files),
    })
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// `encodeRelease`: JSON → gzip (best compression) → standard base64.
pub fn encode(rel: &Release) -> Result<String, String> {
    let json = serde_json::to_vec(rel).map_err(|e| format!("cannot encode release: {e}"))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&json)
        .map_err(|e| format!("cannot compress release: {e}"))?;
    let bytes = gz
        .finish()
        .map_err(|e| format!("cannot compress release: {e}"))?;
    Ok(B64.encode(bytes))
}

/// `decodeRelease`: base64 → gunzip (only if the gzip magic is there) → JSON.
pub fn decode(data: &str) -> Result<Release, String> {
    let mut bytes = B64
        .decode(data.trim().as_bytes())
        .map_err(|e| format!("release data is not base64: {e}"))?;
    if bytes.len() > 3 && bytes[..3] == GZIP_MAGIC {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| format!("release data is not valid gzip: {e}"))?;
        bytes = out;
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("release data is not a release: {e}"))
}

/// The release Secret in `namespace` (`newSecretsObject`): labels are the release's own,
/// then `extra_labels` (`createdAt` / `modifiedAt`), then `name`, `owner`, `status`, `version`.
pub fn to_secret(
    rel: &Release,
    namespace: &str,
    extra_labels: &BTreeMap<String, String>,
) -> Result<Value, String> {
    let encoded = encode(rel)?;
    let mut labels = rel.labels.clone();
    labels.extend(extra_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels.insert("name".into(), rel.name.clone());
    labels.insert("owner".into(), "helm".into());
    labels.insert("status".into(), rel.info.status.as_str().into());
    labels.insert("version".into(), rel.version.to_string());
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": rel.secret_name(),
            "namespace": namespace,
            "labels": labels,
        },
        "type": SECRET_TYPE,
        "data": {"release": B64.encode(encoded.as_bytes())},
    }))
}

/// Decodes a release Secret as read from the API (its `data.release`); the release's labels
/// are the Secret's labels without Helm's system labels.
pub fn from_secret(secret: &Value) -> Result<Release, String> {
    let name = secret
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?");
    let data = secret
        .pointer("/data/release")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("Secret {name} has no data.release"))?;
    let raw = B64
        .decode(data.as_bytes())
        .map_err(|e| format!("Secret {name}: data.release is not base64: {e}"))?;
    let text =
        String::from_utf8(raw).map_err(|_| format!("Secret {name}: data.release is not text"))?;
    let mut rel = decode(&text).map_err(|e| format!("Secret {name}: {e}"))?;
    if let Some(labels) = secret
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    {
        rel.labels = labels
            .iter()
            .filter(|(k, _)| !SYSTEM_LABELS.contains(&k.as_str()))
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect();
    }
    Ok(rel)
}

// ---------------------------------------------------------------------------------------------
// Storage

/// Helm's Secret storage for one namespace (the release namespace, as Landscaper uses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// Namespace of the release Secrets.
    pub namespace: String,
}

fn storage_error(what: String, e: DeployerError) -> DeployerError {
    DeployerError {
        message: format!("{what}: {}", e.message),
        ..e
    }
}

impl Storage {
    /// Storage in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Storage {
        Storage {
            namespace: namespace.into(),
        }
    }

    fn secret_ref(&self, name: &str, version: i64) -> ObjectRef {
        ObjectRef::namespaced("v1", "Secret", &self.namespace, secret_name(name, version))
    }

    /// Every revision of `name` (`owner=helm,name=<name>`), oldest first. Records that do
    /// not decode are skipped, as Helm does.
    pub fn history(&self, ctx: &Ctx, name: &str) -> Result<Vec<Release>, DeployerError> {
        let selector = format!("owner=helm,name={name}");
        let items = ctx
            .kube_list("v1", "Secret", Some(&self.namespace), Some(&selector))
            .map_err(|e| {
                storage_error(format!("query: failed to query with labels {selector}"), e)
            })?;
        let mut out = Vec::new();
        for item in &items {
            match from_secret(item) {
                Ok(rel) => out.push(rel),
                Err(e) => ctx.warn(&format!("query: failed to decode release: {e}")),
            }
        }
        out.sort_by_key(|r| r.version);
        Ok(out)
    }

    /// The newest revision (`Storage.Last`).
    pub fn last(&self, ctx: &Ctx, name: &str) -> Result<Option<Release>, DeployerError> {
        Ok(self.history(ctx, name)?.pop())
    }

    /// The newest `deployed` revision (`Storage.Deployed`).
    pub fn deployed(&self, ctx: &Ctx, name: &str) -> Result<Option<Release>, DeployerError> {
        Ok(self
            .history(ctx, name)?
            .into_iter()
            .rev()
            .find(|r| r.info.status == Status::Deployed))
    }

    /// One revision; `None` if its Secret does not exist.
    pub fn get(
        &self,
        ctx: &Ctx,
        name: &str,
        version: i64,
    ) -> Result<Option<Release>, DeployerError> {
        let key = secret_name(name, version);
        let Some(secret) = ctx
            .kube_get(&self.secret_ref(name, version))
            .map_err(|e| storage_error(format!("get: failed to get {key:?}"), e))?
        else {
            return Ok(None);
        };
        from_secret(&secret).map(Some).map_err(|e| {
            DeployerError::internal(
                "DecodeRelease",
                format!("get: failed to decode data {key:?}: {e}"),
            )
        })
    }

    fn encode_error(what: &str, name: &str, e: String) -> DeployerError {
        DeployerError::internal(
            "EncodeRelease",
            format!("{what}: failed to encode release {name:?}: {e}"),
        )
    }

    /// Stores a new revision (`createdAt` label). An existing Secret of that revision is an
    /// error (`release: already exists`).
    pub fn create(&self, ctx: &Ctx, rel: &Release) -> Result<(), DeployerError> {
        let extra = BTreeMap::from([(
            "createdAt".to_string(),
            (ctx.now_unix_millis() / 1000).to_string(),
        )]);
        let secret = to_secret(rel, &self.namespace, &extra)
            .map_err(|e| Self::encode_error("create", &rel.name, e))?;
        match ctx.kube_create(&secret) {
            Ok(_) => Ok(()),
            Err(e) if e.reason == "AlreadyExists" => Err(DeployerError {
                message: format!("create: release {}: already exists", rel.secret_name()),
                ..e
            }),
            Err(e) => Err(storage_error("create: failed to create".into(), e)),
        }
    }

    /// Rewrites a revision (`modifiedAt` label; `createdAt` and `resourceVersion` kept).
    pub fn update(&self, ctx: &Ctx, rel: &Release) -> Result<(), DeployerError> {
        let key = rel.secret_name();
        let existing = ctx
            .kube_get(&self.secret_ref(&rel.name, rel.version))
            .map_err(|e| storage_error(format!("update: failed to get {key:?}"), e))?;
        let mut extra = BTreeMap::from([(
            "modifiedAt".to_string(),
            (ctx.now_unix_millis() / 1000).to_string(),
        )]);
        if let Some(created) = existing
            .as_ref()
            .and_then(|s| s.pointer("/metadata/labels/createdAt"))
            .and_then(Value::as_str)
        {
            extra.insert("createdAt".into(), created.to_string());
        }
        let mut secret = to_secret(rel, &self.namespace, &extra)
            .map_err(|e| Self::encode_error("update", &rel.name, e))?;
        let Some(existing) = existing else {
            return Err(DeployerError::retryable(
                "NotFound",
                format!("update: failed to update: release {key} not found"),
            ));
        };
        if let Some(rv) = existing.pointer("/metadata/resourceVersion") {
            secret["metadata"]["resourceVersion"] = rv.clone();
        }
        ctx.kube_update(&secret)
            .map(|_| ())
            .map_err(|e| storage_error("update: failed to update".into(), e))
    }

    /// Deletes one revision; `false` if it did not exist.
    pub fn delete(&self, ctx: &Ctx, name: &str, version: i64) -> Result<bool, DeployerError> {
        ctx.kube_delete(&self.secret_ref(name, version))
            .map_err(|e| {
                storage_error(
                    format!("delete: failed to delete {:?}", secret_name(name, version)),
                    e,
                )
            })
    }

    /// `removeLeastRecent(name, max)`: deletes the oldest revisions until at most `max` are
    /// left, never the newest `deployed` one. Helm's `MaxHistory = N` runs this with `N - 1`
    /// before each create. Returns the deleted revisions.
    pub fn prune(&self, ctx: &Ctx, name: &str, max: usize) -> Result<Vec<i64>, DeployerError> {
        let history = self.history(ctx, name)?;
        if history.len() <= max {
            return Ok(Vec::new());
        }
        let deployed = history
            .iter()
            .rev()
            .find(|r| r.info.status == Status::Deployed)
            .map(|r| r.version);
        let mut to_delete = Vec::new();
        for rel in &history {
            if history.len() - to_delete.len() == max {
                break;
            }
            if Some(rel.version) != deployed {
                to_delete.push(rel.version);
            }
        }
        for v in &to_delete {
            self.delete(ctx, name, *v)?;
        }
        Ok(to_delete)
    }

    /// Where else a release called `name` is stored: the first other namespace with release
    /// Secrets of that name (a list over all namespaces; the caller decides what a failure to
    /// list means).
    pub fn find_elsewhere(&self, ctx: &Ctx, name: &str) -> Result<Option<String>, DeployerError> {
        let selector = format!("owner=helm,name={name}");
        let items = ctx.kube_list("v1", "Secret", None, Some(&selector))?;
        Ok(items
            .iter()
            .filter_map(|s| s.pointer("/metadata/namespace").and_then(Value::as_str))
            .find(|ns| *ns != self.namespace)
            .map(str::to_string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::fake::FakeCluster;

    fn sample() -> Release {
        Release {
            name: "web".into(),
            namespace: "apps".into(),
            version: 3,
            info: Info {
                first_deployed: "2026-01-01T10:00:00.5Z".into(),
                last_deployed: "2026-01-02T10:00:00Z".into(),
                status: Status::Deployed,
                description: "Upgrade complete".into(),
                notes: "hello".into(),
                ..Default::default()
            },
            chart: json!({"metadata": {"name": "web", "version": "1.0.0"}, "lock": null}),
            config: json!({"replicas": 2}),
            manifest: "---\n# Source: web/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\n"
                .into(),
            hooks: vec![Hook {
                name: "job".into(),
                kind: "Job".into(),
                events: vec!["pre-install".into()],
                weight: -1,
                ..Default::default()
            }],
            labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
            ..Default::default()
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let rel = sample();
        let text = encode(&rel).unwrap();
        let raw = B64.decode(&text).unwrap();
        assert_eq!(raw[..3], GZIP_MAGIC, "gzipped");
        let mut back = decode(&text).unwrap();
        assert!(back.labels.is_empty(), "labels are not in the JSON");
        back.labels = rel.labels.clone();
        assert_eq!(back, rel);
        // Helm 3's zero times and hook execution are written.
        let json: Value = serde_json::to_value(&rel).unwrap();
        assert_eq!(json["info"]["deleted"], "");
        assert_eq!(
            json["hooks"][0]["last_run"],
            json!({"started_at": "", "completed_at": "", "phase": ""})
        );
        assert_eq!(json["hooks"][0]["weight"], -1);
        assert!(json.get("labels").is_none());
    }

    #[test]
    fn plain_json_records_decode_too() {
        let rel = sample();
        let plain = B64.encode(serde_json::to_vec(&rel).unwrap());
        assert_eq!(decode(&plain).unwrap().name, "web");
        assert!(decode("not base64!").is_err());
    }

    /// A Secret as Helm 3.20 writes it, built by hand: gzipped JSON with Helm's field order,
    /// `""` zero times, a Helm 4 field and a chart field this module does not model.
    fn helm_written_secret() -> Value {
        let release_json = r#"{"name":"nginx","info":{"first_deployed":"2025-11-24T09:15:02.123456789+01:00","last_deployed":"2025-11-24T09:15:02.123456789+01:00","deleted":"","description":"Install complete","status":"deployed","notes":"Thanks","rollback_revision":0,"resources":{"v1/Service":[{"kind":"Service"}]}},"chart":{"metadata":{"name":"nginx","version":"22.1.1","apiVersion":"v2","appVersion":"1.29.3"},"lock":null,"templates":[{"name":"templates/svc.yaml","data":"YXBpVmVyc2lvbjogdjE="}],"values":{"replicaCount":1},"schema":null,"files":null,"schemamodtime":"0001-01-01T00:00:00Z"},"config":{"replicaCount":2},"manifest":"---\n# Source: nginx/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: nginx\n","hooks":[{"name":"nginx-test","kind":"Pod","path":"nginx/templates/tests/t.yaml","manifest":"apiVersion: v1\nkind: Pod","events":["test"],"last_run":{"started_at":"","completed_at":"","phase":""},"output_log_policies":["hook-failed"]}],"version":1,"namespace":"web","apply_method":"csa"}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(release_json.as_bytes()).unwrap();
        let stored = B64.encode(gz.finish().unwrap());
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "sh.helm.release.v1.nginx.v1",
                "namespace": "web",
                "labels": {"name": "nginx", "owner": "helm", "status": "deployed", "version": "1", "createdAt": "1763972102", "tier": "frontend"},
                "resourceVersion": "77",
            },
            "type": "helm.sh/release.v1",
            "data": {"release": B64.encode(stored.as_bytes())},
        })
    }

    #[test]
    fn a_secret_written_by_helm_decodes_and_keeps_unknown_fields() {
        let rel = from_secret(&helm_written_secret()).unwrap();
        assert_eq!(rel.name, "nginx");
        assert_eq!(rel.version, 1);
        assert_eq!(rel.namespace, "web");
        assert_eq!(rel.info.status, Status::Deployed);
        assert_eq!(rel.info.deleted, "");
        assert_eq!(
            rel.info.first_deployed,
            "2025-11-24T09:15:02.123456789+01:00"
        );
        assert_eq!(rel.config, json!({"replicaCount": 2}));
        assert_eq!(rel.chart_ref(), "nginx-22.1.1");
        assert_eq!(rel.hooks[0].events, ["test"]);
        assert_eq!(rel.apply_method, "csa");
        assert_eq!(
            rel.labels,
            BTreeMap::from([("tier".to_string(), "frontend".to_string())])
        );
        // Read-modify-write keeps what is not modelled.
        let mut rel = rel;
        rel.set_status(Status::Superseded, "superseded by new release");
        let again: Value = serde_json::from_slice(&{
            let mut out = Vec::new();
            let raw = B64.decode(encode(&rel).unwrap()).unwrap();
            flate2::read::GzDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .unwrap();
            out
        })
        .unwrap();
        assert_eq!(again["info"]["status"], "superseded");
        assert_eq!(
            again["info"]["resources"]["v1/Service"][0]["kind"],
            "Service"
        );
        assert_eq!(again["info"]["rollback_revision"], 0);
        assert_eq!(again["chart"]["schemamodtime"], "0001-01-01T00:00:00Z");
        assert_eq!(
            again["hooks"][0]["output_log_policies"],
            json!(["hook-failed"])
        );
    }

    #[test]
    fn secrets_carry_helms_labels() {
        let rel = sample();
        let extra = BTreeMap::from([("createdAt".to_string(), "1700000000".to_string())]);
        let s = to_secret(&rel, "apps", &extra).unwrap();
        assert_eq!(s["metadata"]["name"], "sh.helm.release.v1.web.v3");
        assert_eq!(s["metadata"]["namespace"], "apps");
        assert_eq!(s["type"], "helm.sh/release.v1");
        assert_eq!(
            s["metadata"]["labels"],
            json!({"name": "web", "owner": "helm", "status": "deployed", "version": "3", "createdAt": "1700000000", "team": "a"})
        );
        // data.release is base64 of the base64 text.
        let inner = B64.decode(s["data"]["release"].as_str().unwrap()).unwrap();
        let text = String::from_utf8(inner).unwrap();
        assert_eq!(decode(&text).unwrap().version, 3);
        let back = from_secret(&s).unwrap();
        assert_eq!(back, rel);
    }

    #[test]
    fn go_times_are_rfc3339_nano_in_utc() {
        assert_eq!(go_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(go_time(1_767_225_600_000), "2026-01-01T00:00:00Z");
        assert_eq!(go_time(1_767_225_600_120), "2026-01-01T00:00:00.12Z");
        assert_eq!(go_time(951_782_400_000), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn chart_json_follows_helms_tags() {
        let chart = helm_engine::Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: t\nversion: 0.1.0\nappVersion: \"1.0\"\nannotations:\n  a: b\n".to_vec(),
            ),
            ("values.yaml".into(), b"replicas: 1\nname: x\n".to_vec()),
            ("values.schema.json".into(), b"{}".to_vec()),
            ("templates/cm.yaml".into(), b"kind: ConfigMap".to_vec()),
            ("README.md".into(), b"hi".to_vec()),
        ])
        .unwrap();
        let j = chart_json(&chart);
        assert_eq!(
            j["metadata"],
            json!({"name": "t", "version": "0.1.0", "apiVersion": "v2", "appVersion": "1.0", "annotations": {"a": "b"}})
        );
        assert_eq!(j["lock"], Value::Null);
        assert_eq!(
            j["templates"],
            json!([{"name": "templates/cm.yaml", "data": B64.encode("kind: ConfigMap")}])
        );
        assert_eq!(j["values"], json!({"replicas": 1, "name": "x"}));
        assert_eq!(j["schema"], json!(B64.encode("{}")));
        assert_eq!(
            j["files"],
            json!([{"name": "README.md", "data": B64.encode("hi")}])
        );
    }

    fn stored(status: Status, version: i64) -> Release {
        Release {
            name: "web".into(),
            namespace: "apps".into(),
            version,
            info: Info {
                status,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn storage_history_update_and_prune_keep_the_deployed_revision() {
        let cluster = FakeCluster::new();
        let ctx = Ctx::native(&cluster);
        let st = Storage::new("apps");
        st.create(&ctx, &stored(Status::Deployed, 1)).unwrap();
        for v in 2..=5 {
            st.create(&ctx, &stored(Status::Failed, v)).unwrap();
        }
        // Another release and another namespace are not part of the history.
        Storage::new("other")
            .create(&ctx, &stored(Status::Deployed, 1))
            .unwrap();
        let mut other = stored(Status::Deployed, 1);
        other.name = "db".into();
        st.create(&ctx, &other).unwrap();
        let h = st.history(&ctx, "web").unwrap();
        assert_eq!(
            h.iter().map(|r| r.version).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        assert_eq!(st.last(&ctx, "web").unwrap().unwrap().version, 5);
        assert_eq!(st.deployed(&ctx, "web").unwrap().unwrap().version, 1);
        assert!(
            st.create(&ctx, &stored(Status::Failed, 5))
                .unwrap_err()
                .message
                .contains("already exists")
        );

        let mut r5 = st.get(&ctx, "web", 5).unwrap().unwrap();
        r5.set_status(Status::Superseded, "x");
        st.update(&ctx, &r5).unwrap();
        let secret = cluster
            .get("v1", "Secret", Some("apps"), "sh.helm.release.v1.web.v5")
            .unwrap();
        assert_eq!(secret["metadata"]["labels"]["status"], "superseded");
        assert!(secret["metadata"]["labels"]["createdAt"].is_string());
        assert!(secret["metadata"]["labels"]["modifiedAt"].is_string());

        let deleted = st.prune(&ctx, "web", 2).unwrap();
        assert_eq!(deleted, [2, 3, 4]);
        let h = st.history(&ctx, "web").unwrap();
        assert_eq!(h.iter().map(|r| r.version).collect::<Vec<_>>(), [1, 5]);

        assert_eq!(
            st.find_elsewhere(&ctx, "web").unwrap().as_deref(),
            Some("other")
        );
        assert_eq!(st.find_elsewhere(&ctx, "db").unwrap(), None);
        assert!(st.delete(&ctx, "web", 5).unwrap());
        assert!(!st.delete(&ctx, "web", 5).unwrap());
    }
}
