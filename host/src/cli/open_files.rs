//! The open-files limit of a host process. Every Target cluster in use costs a socket, and
//! container runtimes often start processes with a soft limit of 1,024 under a far higher hard
//! limit: a host that talks to a thousand clusters would run out of descriptors there and then
//! fail to reach its own API server too. So `run` and `dev` raise the soft limit to the hard one,
//! as Go's runtime does for every Go program since Go 1.19.
//!
//! Owns: the one rlimit call. Must not touch: anything else of the process.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Raises the soft open-files limit to the hard one; returns the limit now in force (`None`:
/// unlimited or unknown).
pub fn raise() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return limit.current;
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::debug!(from = ?limit.current, to = ?limit.maximum, "raised the open-files soft limit to the hard limit");
            limit.maximum
        }
        Err(e) => {
            tracing::warn!(soft = ?limit.current, hard = ?limit.maximum, error = %e, "could not raise the open-files soft limit");
            limit.current
        }
    }
}

/// Descriptors kept for the host's own use: its API server connections and watches, plugin
/// files and the compiled-plugin cache, metrics, the container deployer.
const RESERVED: u64 = 256;

/// How many Target clients fit under an open-files limit of `limit`: each holds at most one
/// idle connection between calls (`targetClusters.maxClients` defaults to this when it is lower
/// than the usual default).
pub fn clients_within(limit: u64) -> usize {
    usize::try_from(limit.saturating_sub(RESERVED))
        .unwrap_or(usize::MAX)
        .max(16)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_low_limit_leaves_room_for_the_host() {
        assert_eq!(super::clients_within(1024), 768);
        assert_eq!(super::clients_within(100), 16);
        assert!(super::clients_within(1 << 20) > 2000);
    }

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let now = super::raise();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(limit.current, limit.maximum);
        assert_eq!(now, limit.current);
    }
}
