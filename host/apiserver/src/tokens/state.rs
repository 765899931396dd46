//! The token controller's state behind the store lock ([`TokenController`]): the key tokens are
//! signed with (random, or kept in the data dir), the CA written as `ca.crt`, and the token
//! index (token → Secret). Minting and verifying tokens, keeping the index in step with the
//! Secrets' writes.
//!
//! Owns: the token format and its MAC, the key file. Must not touch: the store (the caller
//! hands over the Secrets it writes), authentication decisions (`tokens`).

use crate::builtin::base64_decode_at;
use anyhow::Context as _;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;

/// The type of a legacy ServiceAccount token Secret.
pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
/// The annotation naming the ServiceAccount of a token Secret.
pub const SERVICE_ACCOUNT_NAME: &str = "kubernetes.io/service-account.name";
/// The annotation with the ServiceAccount's uid, written with the token.
pub const SERVICE_ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";
/// The file in the data dir that keeps the key tokens are signed with.
pub const KEY_FILE: &str = "sa-token.key";

/// What every token starts with.
const PREFIX: &str = "eas-sa.";

/// The controller's state behind the store lock: the key, the CA it writes, the token index.
pub(crate) struct TokenController {
    key: [u8; 32],
    /// PEM of the CA clients trust when the server serves HTTPS (`data.ca.crt`).
    pub(crate) ca_pem: Option<String>,
    /// token → (namespace, Secret name), for tokens that verify against their Secret.
    index: HashMap<String, (String, String)>,
}

impl Default for TokenController {
    fn default() -> Self {
        TokenController {
            key: random_key(),
            ca_pem: None,
            index: HashMap::new(),
        }
    }
}

fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    (s.len().is_multiple_of(2) && s.is_ascii())
        .then(|| {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
                .collect()
        })
        .flatten()
}

/// The key tokens are signed with, kept in `dir/`[`KEY_FILE`] (created with a fresh key when
/// missing; an unreadable or malformed one is an error, as a torn store log is).
pub fn load_or_create_key(dir: &Path) -> anyhow::Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => unhex(text.trim())
            .and_then(|k| <[u8; 32]>::try_from(k).ok())
            .with_context(|| format!("{}: not a 32-byte hex key", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let key = random_key();
            write_private(&path, &hex(&key))
                .with_context(|| format!("writing {}", path.display()))?;
            Ok(key)
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    let mut f = o.open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

fn hmac_sha256(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

impl TokenController {
    /// Use `key` (a persisted one) instead of the random one.
    pub(crate) fn set_key(&mut self, key: [u8; 32]) {
        self.key = key;
    }

    fn mac(&self, secret_uid: &str, nonce: &str) -> String {
        hex(&hmac_sha256(
            &self.key,
            format!("{secret_uid}.{nonce}").as_bytes(),
        ))
    }

    /// A fresh token for the Secret with uid `secret_uid`.
    pub(super) fn mint(&self, secret_uid: &str) -> String {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        format!("{PREFIX}{nonce}.{}", self.mac(secret_uid, &nonce))
    }

    /// Whether `token` was minted for the Secret with uid `secret_uid`.
    pub(super) fn verifies(&self, token: &str, secret_uid: &str) -> bool {
        let Some((nonce, mac)) = token.strip_prefix(PREFIX).and_then(|t| t.split_once('.')) else {
            return false;
        };
        let want = self.mac(secret_uid, nonce);
        // Compared in constant time.
        want.len() == mac.len()
            && want
                .bytes()
                .zip(mac.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// The Secret (namespace, name) that holds `token`, if one holding a token it verifies does.
    pub(super) fn secret_of(&self, token: &str) -> Option<&(String, String)> {
        self.index.get(token)
    }

    /// Keeps the token index in step with a Secret's write (`None`: absent before / deleted).
    pub(crate) fn reindex(
        &mut self,
        ns: &str,
        name: &str,
        prev: Option<&Value>,
        new: Option<&Value>,
    ) {
        let old = prev.and_then(token_of);
        let next = new
            .and_then(token_of)
            .filter(|t| self.verifies(t, new.map(uid_of).unwrap_or("")));
        if old == next {
            return;
        }
        if let Some(t) = old
            && self
                .index
                .get(&t)
                .is_some_and(|(n, s)| n == ns && s == name)
        {
            self.index.remove(&t);
        }
        if let Some(t) = next {
            self.index.insert(t, (ns.to_string(), name.to_string()));
        }
    }
}
pub(crate) fn is_token_secret(obj: &Value) -> bool {
    obj.get("type").and_then(Value::as_str) == Some(SECRET_TYPE)
}

/// The token a token Secret holds (decoded), if any.
pub(crate) fn token_of(secret: &Value) -> Option<String> {
    if !is_token_secret(secret) {
        return None;
    }
    let b64 = secret.pointer("/data/token")?.as_str()?;
    let bytes = base64_decode_at(b64).ok()?;
    String::from_utf8(bytes).ok().filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha256_is_rfc_4231s() {
        // RFC 4231 test case 2 has a 4-byte key; ours are 32 bytes, zero-padded as HMAC pads.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex(&hmac_sha256(&key, b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn tokens_verify_only_for_the_secret_they_were_minted_for() {
        let c = TokenController::default();
        let t = c.mint("uid-1");
        assert!(t.starts_with(PREFIX));
        assert!(c.verifies(&t, "uid-1"));
        assert!(!c.verifies(&t, "uid-2"), "copied into another Secret");
        assert!(!c.verifies("eas-sa.abc.def", "uid-1"), "made up");
        assert!(!c.verifies(&t, "uid-1x"));
        let other = TokenController::default();
        assert!(!other.verifies(&t, "uid-1"), "another server's key");
    }

    #[test]
    fn the_key_is_kept_in_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let k = load_or_create_key(dir.path()).unwrap();
        assert_eq!(load_or_create_key(dir.path()).unwrap(), k);
        std::fs::write(dir.path().join(KEY_FILE), "nope").unwrap();
        let e = load_or_create_key(dir.path()).unwrap_err();
        assert!(format!("{e:#}").contains(KEY_FILE), "{e:#}");
    }
}
