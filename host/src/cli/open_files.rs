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

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let now = super::raise();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(limit.current, limit.maximum);
        assert_eq!(now, limit.current);
    }
}
