//! Whether a Target cluster's API server can be reached: one state per endpoint (server URL and
//! TLS settings, whatever the credentials), so that items on a dead cluster fail fast instead of
//! each holding a worker until its deadline, and a rotated kubeconfig inherits what is known.
//!
//! - Unknown (first contact, or a retry is due): the first caller starts one probe (`GET
//!   /version`, any HTTP answer counts) and waits for it at most [`FIRST_CONTACT_WAIT`]; calls
//!   arriving meanwhile wait at most [`FOLLOWER_WAIT`] from its start. A healthy cluster answers
//!   within that; a hanging one holds one worker a quarter of a second and the others hardly at all
//!   (they fail with "no answer yet" and their items are retried a second later).
//! - Up: calls go straight through. A call that cannot reach the cluster marks it Down.
//! - Down: calls fail at once with the cause, until the retry is due (doubling, capped).
//!
//! Owns: the state and the probe. Must not touch: the calls themselves (`super::cluster`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::config::ClusterSettings;
use super::connect::unreachable_cause;

/// Longest the call that starts a probe waits for it before it fails (retried soon).
pub const FIRST_CONTACT_WAIT: Duration = Duration::from_millis(250);

/// Longest other calls wait for a probe, counted from its start: a healthy cluster on a near
/// network answers within it, and a hanging one then holds only one worker for longer.
pub const FOLLOWER_WAIT: Duration = Duration::from_millis(20);

#[derive(Clone, Debug)]
enum State {
    Unknown {
        failures: u32,
    },
    Probing {
        since: Instant,
        failures: u32,
    },
    Up,
    Down {
        cause: Arc<str>,
        until: Instant,
        /// The wait this failure set (`until` minus when it failed).
        wait: Duration,
        failures: u32,
    },
}

/// Why a call was not let through. Its [`Refusal::cause`] stays the same while nothing
/// changes, so that a retried item's `lastError` is not rewritten (each write would wake the
/// item again at once).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The last attempt failed with `cause`; the next is due in `retry_in`, `wait` after it.
    Down {
        cause: Arc<str>,
        retry_in: Duration,
        wait: Duration,
    },
    /// The first contact is under way without an answer yet.
    NoAnswerYet,
}

impl Refusal {
    /// When the item that was refused should try again.
    pub fn retry_in(&self) -> Duration {
        match self {
            Refusal::Down { retry_in, .. } => *retry_in,
            Refusal::NoAnswerYet => Duration::from_secs(1),
        }
    }

    pub fn cause(&self) -> String {
        match self {
            Refusal::Down { cause, wait, .. } => {
                format!("{cause} (tried again every {}s)", wait.as_secs().max(1))
            }
            Refusal::NoAnswerYet => "no answer yet (still connecting)".to_string(),
        }
    }
}

/// The reachability of one endpoint, shared by the clients of every kubeconfig naming it.
pub struct Health {
    state: watch::Sender<State>,
    /// Bumped whenever the endpoint goes Down: discovery cached before is no longer trusted.
    generation: std::sync::atomic::AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            state: watch::Sender::new(State::Unknown { failures: 0 }),
            generation: Default::default(),
        }
    }
}

impl Health {
    /// A cluster known to be reachable (an in-process client).
    pub fn up() -> Self {
        let health = Self::default();
        health.state.send_replace(State::Up);
        health
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the last attempt to reach the endpoint failed and none has succeeded since: a
    /// cluster being probed again after a failure still counts, so that the
    /// `target_clusters_unreachable` gauge does not drop to zero at every retry.
    pub fn is_unreachable(&self) -> bool {
        match *self.state.borrow() {
            State::Down { .. } => true,
            State::Unknown { failures } | State::Probing { failures, .. } => failures > 0,
            State::Up => false,
        }
    }

    /// Lets a call through, probing with `client` first when the state is not known.
    pub async fn admit(
        self: &Arc<Self>,
        client: &kube::Client,
        settings: &ClusterSettings,
    ) -> Result<(), Refusal> {
        let now = Instant::now();
        let mut start_probe = false;
        let mut refusal = None;
        self.state.send_if_modified(|state| match state {
            State::Up | State::Probing { .. } => false,
            State::Down {
                cause,
                until,
                wait,
                failures,
            } => {
                if now < *until {
                    refusal = Some(Refusal::Down {
                        cause: cause.clone(),
                        retry_in: *until - now,
                        wait: *wait,
                    });
                    return false;
                }
                *state = State::Probing {
                    since: now,
                    failures: *failures,
                };
                start_probe = true;
                true
            }
            State::Unknown { failures } => {
                *state = State::Probing {
                    since: now,
                    failures: *failures,
                };
                start_probe = true;
                true
            }
        });
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        if start_probe {
            tokio::spawn(probe(self.clone(), client.clone(), settings.clone()));
        }
        let since = match *self.state.borrow() {
            State::Probing { since, .. } => since,
            _ => now,
        };
        let limit = if start_probe {
            FIRST_CONTACT_WAIT
        } else {
            FOLLOWER_WAIT
        };
        let mut rx = self.state.subscribe();
        let settled = rx.wait_for(|s| !matches!(s, State::Probing { .. }));
        match tokio::time::timeout_at((since + limit).into(), settled).await {
            Ok(Ok(state)) => match &*state {
                State::Down {
                    cause, until, wait, ..
                } => Err(Refusal::Down {
                    cause: cause.clone(),
                    retry_in: until.saturating_duration_since(Instant::now()),
                    wait: *wait,
                }),
                _ => Ok(()),
            },
            Ok(Err(_)) => Ok(()),
            Err(_) => Err(Refusal::NoAnswerYet),
        }
    }

    /// A call could not reach the endpoint (`cause`): calls fail fast until the retry is due,
    /// which is returned.
    pub fn failed(&self, cause: &str, settings: &ClusterSettings) -> Duration {
        let now = Instant::now();
        let mut wait = settings.unreachable_retry;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.state.send_modify(|state| {
            let failures = match state {
                State::Unknown { failures } | State::Probing { failures, .. } => *failures,
                State::Down { failures, .. } => *failures,
                State::Up => 0,
            } + 1;
            wait = retry_delay(settings, failures);
            *state = State::Down {
                cause: cause.into(),
                until: now + wait,
                wait,
                failures,
            };
        });
        wait
    }

    fn succeeded(&self) {
        self.state.send_replace(State::Up);
    }
}

/// The wait before attempt `failures + 1`: the first retry delay, doubling, capped.
fn retry_delay(settings: &ClusterSettings, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    settings
        .unreachable_retry
        .saturating_mul(1 << doublings)
        .min(settings.unreachable_retry_max)
}

/// One `GET /version` within the connect timeout: any HTTP answer (even 401/403) means the
/// endpoint is reachable.
async fn probe(health: Arc<Health>, client: kube::Client, settings: ClusterSettings) {
    let within = settings.connect_timeout;
    match tokio::time::timeout(within, client.apiserver_version()).await {
        Ok(Ok(_)) | Ok(Err(kube::Error::Api(_))) => health.succeeded(),
        Ok(Err(e)) => match unreachable_cause(&e) {
            Some(cause) => {
                health.failed(&cause, &settings);
            }
            // An answer that is not a version (a proxy's page, a decoding error): reachable.
            None => health.succeeded(),
        },
        Err(_) => {
            health.failed(
                &format!("no answer within {}s", within.as_secs_f32()),
                &settings,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ClusterSettings {
        ClusterSettings {
            unreachable_retry: Duration::from_secs(5),
            unreachable_retry_max: Duration::from_secs(60),
            ..ClusterSettings::default()
        }
    }

    #[test]
    fn retries_double_up_to_the_maximum() {
        let s = settings();
        let delays: Vec<u64> = (1..=6).map(|n| retry_delay(&s, n).as_secs()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 60, 60]);
    }

    #[tokio::test]
    async fn a_down_cluster_refuses_at_once_with_its_cause() {
        let health = Arc::new(Health::up());
        let generation = health.generation();
        health.failed("connection refused", &settings());
        assert!(health.generation() > generation, "discovery is not trusted");
        // A client is never used: the refusal comes before any probe.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let started = Instant::now();
        let refusal = health.admit(&client, &settings()).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(100));
        match &refusal {
            Refusal::Down {
                cause, retry_in, ..
            } => {
                assert_eq!(&**cause, "connection refused");
                assert!(*retry_in <= Duration::from_secs(5));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            refusal.cause(),
            "connection refused (tried again every 5s)",
            "the same text however long it waited"
        );
    }

    #[tokio::test]
    async fn a_down_cluster_stays_unreachable_while_it_is_probed_again() {
        let settings = ClusterSettings {
            unreachable_retry: Duration::from_millis(1),
            unreachable_retry_max: Duration::from_millis(1),
            connect_timeout: Duration::from_secs(5),
            ..ClusterSettings::default()
        };
        let health = Arc::new(Health::default());
        assert!(
            !health.is_unreachable(),
            "not known before the first contact"
        );
        health.failed("connection refused", &settings);
        assert!(health.is_unreachable());
        tokio::time::sleep(Duration::from_millis(5)).await;
        // The retry is due: this call starts a probe of a listener that never answers, so the
        // endpoint stays in the probe for the whole connect timeout.
        let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = kube::Client::try_from(kube::Config::new(
            format!("http://{}", hanging.local_addr().unwrap())
                .parse()
                .unwrap(),
        ))
        .unwrap();
        assert_eq!(
            health.admit(&client, &settings).await,
            Err(Refusal::NoAnswerYet)
        );
        assert!(
            matches!(*health.state.borrow(), State::Probing { .. }),
            "probing again"
        );
        assert!(health.is_unreachable(), "still unreachable while probed");
        health.succeeded();
        assert!(!health.is_unreachable());
    }
}
