//! Replicas that do not fight: which replicas of this deployer are alive, and which one of them
//! takes an item.
//!
//! Without it every locking replica sees every job and races for its SyncObject, so each extra
//! replica adds reads and refused writes to every job. With it, each replica holds a
//! `coordination.k8s.io` Lease in its pod's namespace (named after the lock prefix and its pod,
//! labelled with a hash of the prefix), renews it every third of its duration, and lists the
//! others' on the same beat. The live replicas split the items by rendezvous hashing of the item
//! UID ([`owner_of`]): every replica computes the same owner from the same set, and a replica
//! joining or leaving moves only its own share. When the set changes, the controller looks at
//! every item again ([`Membership::changes`]).
//!
//! A hint, never the guarantee: replicas may briefly disagree on the set (both take an item, or
//! neither until they agree), and a replica whose Lease cannot be written keeps its share in its
//! own view. The SyncObject lock (`crate::locking`) stays in front of every job and decides
//! such races exactly as before; Landscaper's own deployers, which know nothing of Leases, keep
//! locking as they always did.
//!
//! Liveness is judged as client-go's leader election judges a lease: by when this replica saw
//! the Lease change, not by the holder's clock (its `renewTime` counts only the first time a
//! Lease is seen). Leases left by replicas that died are deleted once stale for ten durations.
//!
//! Owns: this replica's Lease, the view of live replicas and the hash. Must not touch:
//! SyncObjects, DeployItems, pods.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use sha2::{Digest, Sha256};

/// The label that groups the Leases of one deployer's replicas (its value: [`group_label`]).
pub const GROUP_LABEL: &str = "wasm-deployer.dev/replicas-of";
/// The annotation with the lock prefix itself (a label value cannot hold every prefix).
pub const PREFIX_ANNOTATION: &str = "wasm-deployer.dev/lock-prefix";
/// How long a Lease counts without a renewal, unless configured (`locking.leaseDuration`).
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// Who this replica is among its peers.
#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// The lock prefix: replicas with the same prefix split the same items.
    pub prefix: String,
    /// This replica's pod name (the Lease's holder).
    pub pod_name: String,
    /// Where the Leases live: the replicas' pod namespace, in the cluster they run in.
    pub namespace: String,
    /// A Lease not seen renewed for this long is a dead replica's.
    pub lease_duration: Duration,
}

impl MembershipConfig {
    fn renew_every(&self) -> Duration {
        (self.lease_duration / 3).max(Duration::from_millis(100))
    }

    fn lease_name(&self) -> String {
        lease_name(&self.prefix, &self.pod_name)
    }
}

/// The Lease name of `pod` among the replicas of `prefix`.
pub fn lease_name(prefix: &str, pod: &str) -> String {
    format!("{prefix}-{pod}")
}

/// The value of [`GROUP_LABEL`]: a prefix of any length as a valid label value.
pub fn group_label(prefix: &str) -> String {
    let digest = Sha256::digest(prefix.as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// The replica among `members` that takes the item with `uid`: the highest score of
/// SHA-256(member, uid). Stable across processes, builds and architectures.
pub fn owner_of<'a>(members: &'a [String], uid: &str) -> Option<&'a str> {
    members
        .iter()
        .max_by_key(|member| score(member, uid))
        .map(String::as_str)
}

fn score<'a>(member: &'a str, uid: &str) -> (u64, &'a str) {
    let mut hash = Sha256::new();
    hash.update(member.as_bytes());
    hash.update([0]);
    hash.update(uid.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // The name breaks a (practically impossible) tie the same way everywhere.
    (u64::from_be_bytes(first), member)
}

/// When this replica last saw a peer's Lease change.
struct Seen {
    resource_version: String,
    at: Instant,
}

/// The live replicas as this replica sees them; shared with every reconcile.
pub struct Membership {
    config: MembershipConfig,
    client: Client,
    /// Sorted pod names of the live replicas, this one included; empty until the first list.
    members: RwLock<Arc<[String]>>,
    generation: tokio::sync::watch::Sender<u64>,
}

impl Membership {
    /// `client` is the cluster the replicas run in (where their pods and Leases are).
    pub fn new(client: Client, config: MembershipConfig) -> Self {
        Self {
            config,
            client,
            members: RwLock::new(Arc::from(Vec::new())),
            generation: tokio::sync::watch::Sender::new(0),
        }
    }

    pub fn config(&self) -> &MembershipConfig {
        &self.config
    }

    /// The live replicas (sorted pod names), this one included once its view is known.
    pub fn members(&self) -> Arc<[String]> {
        self.members.read().expect("members").clone()
    }

    /// Whether this replica takes the item with `uid`. Before the first view of its peers
    /// (or with none readable) every item is this replica's: the lock decides, as without Leases.
    pub fn owns(&self, uid: &str) -> bool {
        let members = self.members();
        owner_of(&members, uid).is_none_or(|owner| owner == self.config.pod_name)
    }

    /// Fires whenever the set of live replicas changes.
    pub fn changes(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let rx = self.generation.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    }

    /// Writes this replica's Lease and reads its peers' once (the view the controller starts
    /// with), then renews and reads every third of the lease duration on a task of its own.
    /// A renewal that fails does not stop the reading. Until a read succeeds, and whenever
    /// none has for a whole lease duration, every item is this replica's: the locks decide, as
    /// without Leases (a view that stopped changing could name a dead replica for ever).
    pub async fn start(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let mut seen = HashMap::new();
        let mut viewed_at = None::<Instant>;
        if let Err(e) = self.beat(&api, &mut seen, &mut viewed_at).await {
            tracing::warn!(error = %crate::apierrors::render_error(&e), "replica membership: could not read or write the Leases yet; locks alone decide meanwhile");
        }
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.config.renew_every());
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = self.beat(&api, &mut seen, &mut viewed_at).await {
                    tracing::debug!(error = %crate::apierrors::render_error(&e), "replica membership: renewal or reading failed; retrying");
                }
            }
        })
    }

    /// One beat: renew our Lease, then (whether or not that worked) list the group's, update
    /// the view and remove long-dead Leases. A view older than a lease duration is dropped.
    async fn beat(
        &self,
        api: &Api<Lease>,
        seen: &mut HashMap<String, Seen>,
        viewed_at: &mut Option<Instant>,
    ) -> Result<(), kube::Error> {
        let renewed = self.renew(api).await;
        match self.view(api, seen).await {
            Ok(()) => *viewed_at = Some(Instant::now()),
            Err(e) => {
                if viewed_at.is_some_and(|at| at.elapsed() >= self.config.lease_duration) {
                    tracing::warn!(error = %crate::apierrors::render_error(&e), "replica membership: the Leases have not been readable for a lease duration; this replica takes every item again, the locks decide");
                    self.set_members(Vec::new());
                    *viewed_at = None;
                }
                return Err(e);
            }
        }
        renewed
    }

    /// Lists the group's Leases and updates the view of live replicas from them.
    async fn view(
        &self,
        api: &Api<Lease>,
        seen: &mut HashMap<String, Seen>,
    ) -> Result<(), kube::Error> {
        let listed = api
            .list(&ListParams::default().labels(&format!(
                "{GROUP_LABEL}={}",
                group_label(&self.config.prefix)
            )))
            .await?;
        let now = Instant::now();
        let wall = jiff::Timestamp::now();
        let duration = self.config.lease_duration;
        let mut live = vec![self.config.pod_name.clone()];
        let mut present = Vec::new();
        for lease in listed.items {
            let name = lease.metadata.name.clone().unwrap_or_default();
            let rv = lease.metadata.resource_version.clone().unwrap_or_default();
            let spec = lease.spec.clone().unwrap_or_default();
            let holder = spec.holder_identity.clone().unwrap_or_default();
            present.push(name.clone());
            let entry = seen.entry(name.clone()).or_insert_with(|| {
                // First sight: as old as its renewTime says (never younger than now).
                let age = spec
                    .renew_time
                    .as_ref()
                    .and_then(|t| wall.duration_since(t.0).try_into().ok())
                    .unwrap_or(Duration::ZERO);
                Seen {
                    resource_version: String::new(),
                    at: now.checked_sub(age).unwrap_or(now),
                }
            });
            if !entry.resource_version.is_empty() && entry.resource_version != rv {
                entry.at = now;
            }
            entry.resource_version = rv.clone();
            let silent = now.saturating_duration_since(entry.at);
            if silent < duration {
                if !holder.is_empty() && !live.contains(&holder) {
                    live.push(holder);
                }
            } else if silent > duration * 10 && holder != self.config.pod_name {
                self.remove_stale(api, &name, &lease).await;
            }
        }
        seen.retain(|name, _| present.contains(name));
        live.sort();
        self.set_members(live);
        Ok(())
    }

    /// Replaces the view (sorted), and tells the controller when it changed.
    fn set_members(&self, live: Vec<String>) {
        let changed = {
            let mut members = self.members.write().expect("members");
            let changed = **members != *live;
            if changed {
                *members = Arc::from(live.clone());
            }
            changed
        };
        if changed {
            tracing::info!(replicas = ?live, "replica membership changed");
            self.generation.send_modify(|g| *g += 1);
        }
    }

    /// Creates or renews this replica's Lease.
    async fn renew(&self, api: &Api<Lease>) -> Result<(), kube::Error> {
        let name = self.config.lease_name();
        let now = MicroTime(jiff::Timestamp::now());
        let spec = LeaseSpec {
            holder_identity: Some(self.config.pod_name.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            renew_time: Some(now.clone()),
            ..LeaseSpec::default()
        };
        match api.get_opt(&name).await? {
            Some(mut lease) => {
                lease.spec = Some(LeaseSpec {
                    acquire_time: lease.spec.and_then(|s| s.acquire_time),
                    ..spec
                });
                api.replace(&name, &PostParams::default(), &lease).await?;
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name),
                        namespace: Some(self.config.namespace.clone()),
                        labels: Some(
                            [(GROUP_LABEL.to_string(), group_label(&self.config.prefix))].into(),
                        ),
                        annotations: Some(
                            [(PREFIX_ANNOTATION.to_string(), self.config.prefix.clone())].into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        acquire_time: Some(now),
                        ..spec
                    }),
                };
                api.create(&PostParams::default(), &lease).await?;
            }
        }
        Ok(())
    }

    /// Deletes a dead replica's Lease, unless it changed since it was read.
    async fn remove_stale(&self, api: &Api<Lease>, name: &str, lease: &Lease) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: lease.metadata.uid.clone(),
                resource_version: lease.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        if api.delete(name, &params).await.is_ok() {
            tracing::info!(lease = %name, "replica membership: removed the Lease of a replica long gone");
        }
    }

    /// Gives this replica's Lease back, so its peers take its share at once.
    pub async fn leave(&self) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let name = self.config.lease_name();
        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
            tracing::debug!(error = %crate::apierrors::render_error(&e), "replica membership: the Lease stays until it expires");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_apiserver::FaultConfig;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_replica_computes_the_same_owner_whatever_the_order() {
        let a = members(&["host-0", "host-1", "host-2"]);
        let b = members(&["host-2", "host-0", "host-1"]);
        for i in 0..200 {
            let uid = format!("uid-{i}");
            assert_eq!(owner_of(&a, &uid), owner_of(&b, &uid));
        }
    }

    #[test]
    fn items_split_about_evenly_among_five_replicas() {
        let five = members(&["a", "b", "c", "d", "e"]);
        let mut counts = HashMap::new();
        for i in 0..10_000 {
            *counts
                .entry(owner_of(&five, &format!("{i:08x}-uid")).unwrap())
                .or_insert(0) += 1;
        }
        for (member, n) in counts {
            assert!((1_700..2_300).contains(&n), "{member}: {n} of 10,000");
        }
    }

    #[test]
    fn a_replica_leaving_moves_only_its_own_items() {
        let before = members(&["a", "b", "c", "d"]);
        let after = members(&["a", "b", "d"]);
        for i in 0..2_000 {
            let uid = format!("item-{i}");
            let was = owner_of(&before, &uid).unwrap();
            let is = owner_of(&after, &uid).unwrap();
            if was != "c" {
                assert_eq!(was, is, "{uid} moved from {was} to {is}");
            }
        }
    }

    #[test]
    fn the_owner_is_fixed_across_builds() {
        // Replicas of different releases must agree during a rolling upgrade: the hash is
        // SHA-256, not the standard library's (unspecified, per-process) hasher.
        let three = members(&["host-0", "host-1", "host-2"]);
        let owners: Vec<&str> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|u| owner_of(&three, u).unwrap())
            .collect();
        assert_eq!(owners, FIXED_OWNERS);
    }

    // The owners as the protocol defines them (the highest big-endian first 8 bytes of
    // SHA-256(member, 0, uid)), computed independently with Python's hashlib:
    // max(ms, key=lambda m: int.from_bytes(sha256(m + b"\0" + u).digest()[:8], "big")).
    const FIXED_OWNERS: [&str; 6] = ["host-1", "host-2", "host-0", "host-2", "host-1", "host-0"];

    #[test]
    fn a_group_label_is_a_valid_label_value_for_any_prefix() {
        let long = "x".repeat(300);
        for prefix in ["wasm-deployer", long.as_str(), "Ünïcode/prefix"] {
            let label = group_label(prefix);
            assert_eq!(label.len(), 24);
            assert!(label.chars().all(|c| c.is_ascii_hexdigit()));
        }
    }

    #[test]
    fn with_no_view_yet_every_item_is_ours() {
        let m = Membership {
            config: MembershipConfig {
                prefix: "p".into(),
                pod_name: "host-0".into(),
                namespace: "ns".into(),
                lease_duration: DEFAULT_LEASE_DURATION,
            },
            client: dummy_client(),
            members: RwLock::new(Arc::from(Vec::new())),
            generation: tokio::sync::watch::Sender::new(0),
        };
        assert!(m.owns("anything"));
        *m.members.write().unwrap() = Arc::from(members(&["host-0", "host-1"]));
        let mine = (0..100).filter(|i| m.owns(&format!("u{i}"))).count();
        assert!((20..80).contains(&mine), "{mine} of 100");
    }

    /// Waits (up to 10 s) until `m`'s view is `want`.
    async fn wait_view(m: &Membership, want: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while *m.members() != *members(want) {
            assert!(
                Instant::now() < deadline,
                "view {:?}, want {want:?}",
                m.members()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn given_leases_that_cannot_be_written_or_read_then_the_view_follows_the_peers_or_falls_back_to_every_item()
     {
        let server = embedded_apiserver::ApiServer::new(Default::default()).unwrap();
        let replica = |pod: &str| {
            Arc::new(Membership::new(
                server.client(),
                MembershipConfig {
                    prefix: "p".into(),
                    pod_name: pod.into(),
                    namespace: "default".into(),
                    lease_duration: Duration::from_millis(600),
                },
            ))
        };
        let (a, b) = (replica("host-a"), replica("host-b"));
        let _beats = (a.clone().start().await, b.clone().start().await);
        // Given two replicas that see each other,
        wait_view(&a, &["host-a", "host-b"]).await;
        // when no Lease can be written (every write refused), each still reads the others':
        // the silent peer is dead to it, and every item is its own (not a view frozen with a
        // peer that may be gone);
        server.set_faults(FaultConfig {
            write_error_probability: 1.0,
            ..Default::default()
        });
        wait_view(&a, &["host-a"]).await;
        wait_view(&b, &["host-b"]).await;
        // when nothing can be read either, a view older than a lease duration is dropped:
        // every item is this replica's, the locks decide;
        server.set_faults(FaultConfig {
            unavailable_probability: 1.0,
            ..Default::default()
        });
        wait_view(&a, &[]).await;
        assert!((0..20).all(|i| a.owns(&format!("u{i}"))));
        // and once the server answers again, they split the items again.
        server.set_faults(FaultConfig::default());
        wait_view(&a, &["host-a", "host-b"]).await;
        wait_view(&b, &["host-a", "host-b"]).await;
    }

    fn dummy_client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        Client::try_from(config).unwrap()
    }
}
