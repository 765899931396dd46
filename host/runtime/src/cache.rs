//! On-disk cache of compiled components.
//!
//! Owns: the files under the configured cache directory. One file per component and engine,
//! `<sha256 of the component>-<engine hash, first 8 bytes>.cwasm` (so hosts of two
//! architectures, or two wasmtime versions, sharing a cache each keep their own), laid out as
//! `MAGIC (8) | engine hash (32) | component sha256 (32) | HMAC-SHA256 tag (32) | artifact`.
//! The engine hash is a SHA-256 over `Engine::precompile_compatibility_hash` (wasmtime
//! version, compiler settings, tunables). The tag is keyed with a random 256-bit key that
//! the runtime creates in `<dir>/cache.key` (mode 0600) and covers everything before the
//! artifact plus the artifact itself.
//!
//! Loading an artifact is `unsafe` (`Component::deserialize` trusts the bytes), so a file is
//! only handed out if magic, engine hash, component hash and tag all match: a file this
//! runtime did not write (foreign, tampered, truncated, from another wasmtime or config) is
//! rejected and the component is recompiled and the file rewritten.
//! Must not touch: anything outside the cache directory. The key lives in the cache
//! directory, so the directory must be writable only by the host user (created 0700).

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"WDPLUGC1";
const HEADER: usize = 8 + 32 + 32 + 32;
const KEY_FILE: &str = "cache.key";

/// Result of a cache lookup.
pub(crate) enum Lookup {
    /// A verified artifact.
    Hit(Vec<u8>),
    /// No file.
    Miss,
    /// A file exists but was not accepted; the reason says why.
    Rejected(String),
}

pub(crate) struct ArtifactCache {
    dir: PathBuf,
    key: [u8; 32],
    engine_hash: [u8; 32],
}

/// Feeds `Hash` output into SHA-256 (stable across processes, unlike `DefaultHasher`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        // Not used: callers take the full digest.
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// SHA-256 over the engine's precompile-compatibility hash and this cache format.
pub(crate) fn engine_hash(engine: &wasmtime::Engine) -> [u8; 32] {
    let mut h = ShaHasher(Sha256::new());
    h.0.update(MAGIC);
    engine.precompile_compatibility_hash().hash(&mut h);
    h.0.finalize().into()
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn hmac_sha256(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut ipad = [0x36u8; 64];
    let mut opad = [0x5cu8; 64];
    for (i, k) in key.iter().enumerate() {
        ipad[i] ^= k;
        opad[i] ^= k;
    }
    let mut inner = Sha256::new();
    inner.update(ipad);
    for p in parts {
        inner.update(p);
    }
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(opad);
    outer.update(inner);
    outer.finalize().into()
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A file name for a temporary file that is unique within the host (pid + counter + random).
fn unique_tmp(dir: &Path, stem: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut r = [0u8; 8];
    let _ = getrandom::fill(&mut r);
    dir.join(format!(
        ".{stem}.{}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        hex::encode(r)
    ))
}

fn load_or_create_key(dir: &Path) -> Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    for _ in 0..3 {
        if let Ok(bytes) = std::fs::read(&path) {
            if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
                return Ok(key);
            }
            // Malformed: replace it (this invalidates every existing artifact).
            let _ = std::fs::remove_file(&path);
        }
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("getrandom: {e}"))?;
        let tmp = unique_tmp(dir, KEY_FILE);
        {
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            let mut f = opts
                .open(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            f.write_all(&key)?;
            f.sync_all()?;
        }
        // hard_link fails if the key exists: the first writer wins, everyone uses its key.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => return Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("writing {}", path.display())),
        }
    }
    anyhow::bail!("could not create or read {}", path.display())
}

impl ArtifactCache {
    pub(crate) fn open(dir: &Path, engine_hash: [u8; 32]) -> Result<Self> {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(dir)
            .with_context(|| format!("creating cache directory {}", dir.display()))?;
        let key = load_or_create_key(dir)?;
        Ok(ArtifactCache {
            dir: dir.to_path_buf(),
            key,
            engine_hash,
        })
    }

    pub(crate) fn path(&self, sha: &[u8; 32]) -> PathBuf {
        self.dir.join(format!(
            "{}-{}.cwasm",
            hex::encode(sha),
            hex::encode(&self.engine_hash[..8])
        ))
    }

    pub(crate) fn read(&self, sha: &[u8; 32]) -> Lookup {
        let path = self.path(sha);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Rejected(format!("unreadable: {e}")),
        };
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            return Lookup::Rejected("not written by this runtime (bad header)".into());
        }
        if bytes[8..40] != self.engine_hash {
            return Lookup::Rejected(
                "engine mismatch (written by another wasmtime version or configuration)".into(),
            );
        }
        if bytes[40..72] != sha[..] {
            return Lookup::Rejected("component hash mismatch".into());
        }
        let tag = hmac_sha256(&self.key, &[&bytes[..72], &bytes[HEADER..]]);
        if !ct_eq(&tag, &bytes[72..HEADER]) {
            return Lookup::Rejected("authentication tag mismatch (tampered or foreign)".into());
        }
        Lookup::Hit(bytes[HEADER..].to_vec())
    }

    pub(crate) fn write(&self, sha: &[u8; 32], artifact: &[u8]) -> Result<()> {
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&self.engine_hash);
        header.extend_from_slice(sha);
        let tag = hmac_sha256(&self.key, &[&header, artifact]);
        header.extend_from_slice(&tag);
        let path = self.path(sha);
        let tmp = unique_tmp(&self.dir, &hex::encode(sha));
        let written = (|| -> Result<()> {
            let mut f = std::fs::File::create(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
            f.write_all(&header)?;
            f.write_all(artifact)?;
            drop(f);
            std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc4231_case_2_shape() {
        // RFC 4231 test case 2 uses a 4-byte key; our key is fixed-size, so check against a
        // 32-byte key zero-padded (HMAC pads keys with zeros, so this is the same function).
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let tag = hmac_sha256(&key, &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn roundtrip_and_rejections() {
        let dir = tempfile::tempdir().unwrap();
        let sha = sha256(b"component");
        let c = ArtifactCache::open(dir.path(), [7; 32]).unwrap();
        assert!(matches!(c.read(&sha), Lookup::Miss));
        c.write(&sha, b"artifact").unwrap();
        assert!(matches!(c.read(&sha), Lookup::Hit(a) if a == b"artifact"));

        // Same key (reopened), another engine (another architecture or wasmtime): a file of
        // its own, so both stay cached side by side.
        let other = ArtifactCache::open(dir.path(), [8; 32]).unwrap();
        assert_ne!(other.path(&sha), c.path(&sha));
        assert!(matches!(other.read(&sha), Lookup::Miss));
        other.write(&sha, b"other artifact").unwrap();
        assert!(matches!(other.read(&sha), Lookup::Hit(a) if a == b"other artifact"));
        assert!(matches!(c.read(&sha), Lookup::Hit(a) if a == b"artifact"));
        // and another engine's file under this engine's name is rejected.
        std::fs::copy(other.path(&sha), c.path(&sha)).unwrap();
        assert!(matches!(c.read(&sha), Lookup::Rejected(r) if r.contains("engine")));
        c.write(&sha, b"artifact").unwrap();

        // Tampered artifact byte: rejected.
        let path = c.path(&sha);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(c.read(&sha), Lookup::Rejected(r) if r.contains("tag")));

        // Foreign file: rejected.
        std::fs::write(&path, b"\0asm garbage").unwrap();
        assert!(matches!(c.read(&sha), Lookup::Rejected(r) if r.contains("header")));

        // A new key invalidates old files.
        c.write(&sha, b"artifact").unwrap();
        std::fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        let rekeyed = ArtifactCache::open(dir.path(), [7; 32]).unwrap();
        assert!(matches!(rekeyed.read(&sha), Lookup::Rejected(r) if r.contains("tag")));
    }
}
