//! Reading a pod: the `providerStatus` the container deployer reports (contract section 9.8,
//! plus the pod's phase, the job it ran for and a message), and what the pod's state means for
//! the job — still running, succeeded, or failed with which error.
//!
//! Owns: pure functions from a Pod to status and outcome. Must not touch: the cluster.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::API_VERSION;
use super::pod::{LABEL_JOB_ID, Operation, label_value};
use crate::landscaper::codes;
use plugin_runtime::DeployerError;

/// One container as the provider status shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(default, rename = "imageID", skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// `providerStatus.podStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReport {
    #[serde(default)]
    pub pod_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// The job the pod ran for.
    #[serde(default, rename = "jobID", skip_serializing_if = "String::is_empty")]
    pub job_id: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(
        default,
        rename = "lastSuccessfulJobID",
        skip_serializing_if = "String::is_empty"
    )]
    pub last_successful_job_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_status: Option<ContainerReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_container_status: Option<ContainerReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_container_status: Option<ContainerReport>,
    /// The error a failed pod ended its job with (kept so a retried final write says the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<PodError>,
}

/// A failed pod's error, as stored in the status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodError {
    pub code: String,
    pub reason: String,
    pub message: String,
}

/// `status.providerStatus` of a container DeployItem.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    /// `RECONCILE` or `DELETE`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_operation: String,
    /// What the pod is doing, in one sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_status: Option<PodReport>,
}

impl ProviderStatus {
    /// The previous status, or an empty one if there is none or it is not ours.
    pub fn decode(previous: Option<&Value>) -> Self {
        previous
            .and_then(|v| serde_json::from_value::<ProviderStatus>(v.clone()).ok())
            .unwrap_or_default()
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The pod report if it belongs to `job_id` and `operation`.
    pub fn pod_of(&self, job_id: &str, operation: Operation) -> Option<&PodReport> {
        self.pod_status
            .as_ref()
            .filter(|p| p.job_id == job_id && self.last_operation == operation.as_str())
    }
}

/// What a pod means for its job.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Still pending or running.
    Active,
    Succeeded,
    /// Failed (or can never start): the job's error.
    Failed(DeployerError),
}

/// Waiting reasons that mean the image will not come (Landscaper's list).
const IMAGE_FAILURES: [&str; 5] = [
    "ErrImagePull",
    "ErrInvalidImageName",
    "RegistryUnavailable",
    "ErrImageNeverPull",
    "ImagePullBackOff",
];

fn statuses(pod: &Pod) -> impl Iterator<Item = &ContainerStatus> {
    let s = pod.status.as_ref();
    s.and_then(|s| s.init_container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            s.and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten(),
        )
}

fn container<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    statuses(pod).find(|c| c.name == name)
}

fn report(c: &ContainerStatus) -> ContainerReport {
    let state = c.state.as_ref();
    let mut r = ContainerReport {
        state: state.and_then(|s| serde_json::to_value(s).ok()),
        image: c.image.clone(),
        image_id: c.image_id.clone(),
        ..Default::default()
    };
    if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
        r.reason = w.reason.clone();
        r.message = w.message.clone();
    } else if state.and_then(|s| s.running.as_ref()).is_some() {
        r.reason = Some("Running".into());
    } else if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
        r.reason = t.reason.clone();
        r.message = t.message.clone();
        r.exit_code = Some(t.exit_code);
    }
    r
}

/// The pod's phase (`Pending` if it has none yet).
pub fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into())
}

/// Whether the pod may still run containers.
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod).as_str(), "Succeeded" | "Failed")
}

/// The job a pod runs for (its label).
pub fn job_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_JOB_ID))
        .map(String::as_str)
}

/// Whether `pod` was started for `job_id` (label values may be shortened).
pub fn runs_job(pod: &Pod, job_id: &str) -> bool {
    job_of(pod) == Some(label_value(job_id).as_str())
}

fn terminated_failure(c: &ContainerStatus) -> Option<(i32, String, String)> {
    let t = c.state.as_ref()?.terminated.as_ref()?;
    (t.exit_code != 0).then(|| {
        (
            t.exit_code,
            t.reason.clone().unwrap_or_else(|| "Error".into()),
            t.message.clone().unwrap_or_default().trim().to_string(),
        )
    })
}

/// What the pod's state means for its job.
pub fn outcome(pod: &Pod) -> Outcome {
    // An image that cannot be pulled never becomes a container: fail now, as Landscaper does.
    for c in statuses(pod) {
        if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref())
            && let Some(reason) = w.reason.as_deref()
            && IMAGE_FAILURES.contains(&reason)
        {
            let message = w.message.clone().unwrap_or_default();
            return Outcome::Failed(DeployerError::configuration(
                reason,
                format!(
                    "{} container: image {:?} cannot be pulled: {reason}{}",
                    c.name,
                    c.image,
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    }
                ),
            ));
        }
    }
    let status = pod.status.as_ref();
    match phase(pod).as_str() {
        "Succeeded" => Outcome::Succeeded,
        "Failed" => {
            let pod_reason = status.and_then(|s| s.reason.clone()).unwrap_or_default();
            let pod_message = status.and_then(|s| s.message.clone()).unwrap_or_default();
            if pod_reason == "DeadlineExceeded" {
                return Outcome::Failed(DeployerError::timeout(
                    "DeadlineExceeded",
                    format!(
                        "the pod ran out of time (the item's progressing timeout): {pod_message}"
                    ),
                ));
            }
            // The user's program first: wait fails too when main did, but main is the cause.
            for name in ["init", "main", "wait"] {
                if let Some((code, reason, message)) =
                    container(pod, name).and_then(terminated_failure)
                {
                    let what = match name {
                        "init" => "init container (inputs and state)",
                        "main" => "main container",
                        _ => "wait container (state and exports)",
                    };
                    let mut text = format!("{what} exited with code {code} ({reason})");
                    if !message.is_empty() {
                        text.push_str(": ");
                        text.push_str(&message);
                    }
                    let error = DeployerError::internal(
                        match name {
                            "init" => "RunInitContainer",
                            "main" => "RunMainContainer",
                            _ => "RunWaitContainer",
                        },
                        text,
                    );
                    return Outcome::Failed(error);
                }
            }
            let why = if pod_reason.is_empty() {
                "Failed".to_string()
            } else {
                pod_reason
            };
            Outcome::Failed(DeployerError::internal(
                why.clone(),
                format!(
                    "the pod failed: {why}{}",
                    if pod_message.is_empty() {
                        String::new()
                    } else {
                        format!(": {pod_message}")
                    }
                ),
            ))
        }
        _ => Outcome::Active,
    }
}

/// The provider status for `pod`, run for `job_id` as `operation`; `previous` keeps the last
/// successful job.
pub fn observe(
    pod: &Pod,
    job_id: &str,
    operation: Operation,
    outcome: &Outcome,
    previous: &ProviderStatus,
) -> ProviderStatus {
    let mut last_successful = previous
        .pod_status
        .as_ref()
        .map(|p| p.last_successful_job_id.clone())
        .unwrap_or_default();
    let phase = phase(pod);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let (message, error) = match outcome {
        Outcome::Active => (format!("pod {name} is {phase}"), None),
        Outcome::Succeeded => {
            last_successful = job_id.to_string();
            (format!("pod {name} succeeded"), None)
        }
        Outcome::Failed(e) => (
            e.message.clone(),
            Some(PodError {
                code: e.codes.first().cloned().unwrap_or_default(),
                reason: e.reason.clone(),
                message: e.message.clone(),
            }),
        ),
    };
    ProviderStatus {
        api_version: API_VERSION.into(),
        kind: "ProviderStatus".into(),
        last_operation: operation.as_str().into(),
        message,
        pod_status: Some(PodReport {
            pod_name: name,
            last_run: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string()),
            job_id: job_id.into(),
            phase,
            last_successful_job_id: last_successful,
            container_status: container(pod, "main").map(report),
            init_container_status: container(pod, "init").map(report),
            wait_container_status: container(pod, "wait").map(report),
            error,
        }),
    }
}

impl PodError {
    /// The error again, as the job ends with it.
    pub fn to_error(&self) -> DeployerError {
        let codes: Vec<&str> = if self.code.is_empty() {
            vec![codes::INTERNAL_PROBLEM]
        } else {
            vec![self.code.as_str()]
        };
        DeployerError::new(&codes, self.reason.clone(), self.message.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p-1", "labels": {LABEL_JOB_ID: "j1"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": status,
        }))
        .unwrap()
    }

    fn terminated(name: &str, code: i32, reason: &str, message: &str) -> Value {
        json!({"name": name, "image": "img", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"terminated": {"exitCode": code, "reason": reason, "message": message}}})
    }

    #[test]
    fn a_running_pod_is_active_and_reported() {
        let p = pod(json!({"phase": "Running", "containerStatuses": [
            {"name": "main", "image": "alpine", "imageID": "sha", "ready": true, "restartCount": 0, "state": {"running": {}}}
        ]}));
        assert_eq!(outcome(&p), Outcome::Active);
        assert!(runs_job(&p, "j1"));
        let s = observe(
            &p,
            "j1",
            Operation::Reconcile,
            &Outcome::Active,
            &ProviderStatus::default(),
        );
        let ps = s.pod_status.unwrap();
        assert_eq!(ps.pod_name, "p-1");
        assert_eq!(ps.phase, "Running");
        assert_eq!(
            ps.container_status.unwrap().reason.as_deref(),
            Some("Running")
        );
        assert_eq!(s.last_operation, "RECONCILE");
    }

    #[test]
    fn image_pull_failures_are_configuration_problems() {
        let p = pod(json!({"phase": "Pending", "containerStatuses": [
            {"name": "main", "image": "nope:1", "imageID": "", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ErrImagePull", "message": "manifest unknown"}}}
        ]}));
        let Outcome::Failed(e) = outcome(&p) else {
            panic!()
        };
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM));
        assert_eq!(e.reason, "ErrImagePull");
        assert!(
            e.message.contains("\"nope:1\"") && e.message.contains("manifest unknown"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_main_container_is_blamed_before_the_wait_container() {
        let p = pod(json!({"phase": "Failed", "containerStatuses": [
            terminated("wait", 1, "Error", "main container exited with code 137"),
            terminated("main", 137, "OOMKilled", ""),
        ]}));
        let Outcome::Failed(e) = outcome(&p) else {
            panic!()
        };
        assert_eq!(e.reason, "RunMainContainer");
        assert!(e.message.contains("code 137 (OOMKilled)"), "{}", e.message);
        let s = observe(
            &p,
            "j1",
            Operation::Reconcile,
            &Outcome::Failed(e.clone()),
            &ProviderStatus::default(),
        );
        assert_eq!(
            s.pod_status
                .as_ref()
                .unwrap()
                .error
                .as_ref()
                .unwrap()
                .to_error(),
            e
        );
    }

    #[test]
    fn deadline_exceeded_is_a_timeout_and_success_is_remembered() {
        let p = pod(
            json!({"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active on the node longer than the specified deadline"}),
        );
        let Outcome::Failed(e) = outcome(&p) else {
            panic!()
        };
        assert!(e.has_code(codes::TIMEOUT));
        let ok = pod(json!({"phase": "Succeeded"}));
        assert_eq!(outcome(&ok), Outcome::Succeeded);
        let s = observe(
            &ok,
            "j1",
            Operation::Reconcile,
            &Outcome::Succeeded,
            &ProviderStatus::default(),
        );
        assert_eq!(s.pod_status.unwrap().last_successful_job_id, "j1");
        let failed_init = pod(
            json!({"phase": "Failed", "initContainerStatuses": [terminated("init", 2, "Error", "no config")]}),
        );
        let Outcome::Failed(e) = outcome(&failed_init) else {
            panic!()
        };
        assert!(
            e.message.contains("init container") && e.message.contains("no config"),
            "{}",
            e.message
        );
    }
}
