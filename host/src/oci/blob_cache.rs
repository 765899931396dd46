//! Content-addressed blobs for every download of the host (plugins' fetches, OCM reads): a
//! bounded memory (oldest out first) and, if configured, a directory of `sha256/<hex>` files,
//! so a blob whose digest is known is fetched once; with the size limit and the download count.
//!
//! Owns: storing and serving blobs by digest, the size limit. Must not touch: where blobs come
//! from.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use plugin_runtime::DeployerError;
use sha2::{Digest as _, Sha256};

use super::error::error;
use crate::landscaper::codes;

/// `sha256:<hex>` of `data`.
pub fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Whether two digests are the same, with or without the algorithm (chart repository indexes
/// carry the bare hex digest).
pub fn digest_matches(expected: &str, actual: &str) -> bool {
    let hex = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
    hex(expected) == hex(actual)
}

/// The host's blobs: the cache, the size limit of one download, and how many went to the
/// network.
pub struct Blobs {
    cache: BlobCache,
    /// Largest download in bytes (`fetch.maxMib`).
    pub max_bytes: u64,
    /// Downloads that went to the network (the rest came from the cache).
    pub downloads: AtomicU64,
}

impl Blobs {
    /// Blobs of at most `max_bytes`, `cache_bytes` of them in memory, and in `dir` if given.
    pub fn new(max_bytes: u64, cache_bytes: u64, dir: Option<PathBuf>) -> Self {
        Blobs {
            cache: BlobCache::new(cache_bytes, dir),
            max_bytes,
            downloads: AtomicU64::default(),
        }
    }

    /// The blob with `digest`, if cached.
    pub fn get(&self, digest: &str) -> Option<Arc<Vec<u8>>> {
        self.cache.get(digest)
    }

    /// Counts one download that went to the network.
    pub fn count_download(&self) {
        self.downloads.fetch_add(1, Ordering::Relaxed);
    }

    /// Remembers `data` under `digest` (its own) and gives it back.
    pub fn put(&self, digest: &str, data: Vec<u8>) -> Vec<u8> {
        self.cache.put(digest, data)
    }

    /// A download of `len` bytes from `location` is within the limit.
    pub fn check_size(&self, location: &str, len: u64) -> Result<(), DeployerError> {
        if len > self.max_bytes {
            return Err(error(
                Some(codes::CONFIGURATION_PROBLEM),
                "TooLarge",
                format!(
                    "{location} is larger than the host's limit of {} MiB (fetch.maxMib)",
                    self.max_bytes >> 20
                ),
            ));
        }
        Ok(())
    }
}

/// Content-addressed blobs: memory (bounded, oldest out first) and, if configured, a directory.
pub(super) struct BlobCache {
    max_bytes: u64,
    dir: Option<PathBuf>,
    memory: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    blobs: HashMap<String, Arc<Vec<u8>>>,
    order: VecDeque<String>,
    bytes: u64,
}

impl BlobCache {
    fn new(max_bytes: u64, dir: Option<PathBuf>) -> Self {
        BlobCache {
            max_bytes,
            dir,
            memory: Mutex::default(),
        }
    }

    fn key(digest: &str) -> Option<String> {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        (hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| hex.to_ascii_lowercase())
    }

    fn get(&self, digest: &str) -> Option<Arc<Vec<u8>>> {
        let key = Self::key(digest)?;
        if let Some(b) = self.memory.lock().expect("cache lock").blobs.get(&key) {
            return Some(b.clone());
        }
        let path = self.dir.as_ref()?.join("sha256").join(&key);
        let data = std::fs::read(path).ok()?;
        // Never serve a file whose content does not match its name.
        (sha256(&data) == format!("sha256:{key}")).then(|| self.remember(key, data))
    }

    fn put(&self, digest: &str, data: Vec<u8>) -> Vec<u8> {
        let Some(key) = Self::key(digest) else {
            return data;
        };
        if let Some(dir) = &self.dir {
            let dir = dir.join("sha256");
            let tmp = dir.join(format!(".{key}.tmp"));
            let written = std::fs::create_dir_all(&dir)
                .and_then(|_| std::fs::write(&tmp, &data))
                .and_then(|_| std::fs::rename(&tmp, dir.join(&key)));
            if let Err(e) = written {
                tracing::warn!(error = %e, "fetch cache: could not write {}", dir.display());
            }
        }
        self.remember(key, data).to_vec()
    }

    fn remember(&self, key: String, data: Vec<u8>) -> Arc<Vec<u8>> {
        let data = Arc::new(data);
        let size = data.len() as u64;
        if size > self.max_bytes {
            return data;
        }
        let mut m = self.memory.lock().expect("cache lock");
        if m.blobs.insert(key.clone(), data.clone()).is_none() {
            m.order.push_back(key);
            m.bytes += size;
        }
        while m.bytes > self.max_bytes {
            let Some(old) = m.order.pop_front() else {
                break;
            };
            if let Some(b) = m.blobs.remove(&old) {
                m.bytes -= b.len() as u64;
            }
        }
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_serves_by_digest_and_evicts_the_oldest() {
        let cache = BlobCache::new(10, None);
        let a = vec![1u8; 6];
        let b = vec![2u8; 6];
        let (da, db) = (sha256(&a), sha256(&b));
        cache.put(&da, a.clone());
        assert_eq!(cache.get(&da).as_deref(), Some(&a));
        cache.put(&db, b.clone());
        assert!(cache.get(&da).is_none(), "a was evicted for b");
        assert_eq!(cache.get(&db).as_deref(), Some(&b));
    }

    #[test]
    fn the_disk_cache_never_serves_a_file_whose_content_changed() {
        let dir = tempfile::tempdir().unwrap();
        let data = b"chart".to_vec();
        let digest = sha256(&data);
        BlobCache::new(1 << 20, Some(dir.path().into())).put(&digest, data.clone());
        let fresh = BlobCache::new(1 << 20, Some(dir.path().into()));
        assert_eq!(fresh.get(&digest).as_deref(), Some(&data));
        let file = dir
            .path()
            .join("sha256")
            .join(digest.trim_start_matches("sha256:"));
        std::fs::write(&file, b"tampered").unwrap();
        assert!(
            BlobCache::new(1 << 20, Some(dir.path().into()))
                .get(&digest)
                .is_none()
        );
    }

    #[test]
    fn digests_compare_with_or_without_the_algorithm() {
        assert!(digest_matches("ABCD", "sha256:abcd"));
        assert!(digest_matches("sha256:abcd", "sha256:abcd"));
        assert!(!digest_matches("sha256:abce", "sha256:abcd"));
    }
}
