//! Trust in a fetched plugin: digest pins (`sha256:<hex>` of the component bytes) and
//! cosign-compatible keyed signatures — ECDSA P-256 / SHA-256, DER, base64 — checked against
//! the configured public keys (PEM, SubjectPublicKeyInfo, as `cosign.pub`) before anything is
//! compiled:
//!
//! - OCI: the signature artifact `<repository>:sha256-<manifest hex>.sig` whose layer
//!   (`application/vnd.dev.cosign.simplesigning.v1+json`) is the simple-signing payload naming
//!   the manifest digest, with the signature in the annotation
//!   `dev.cosignproject.cosign/signature` (what `cosign sign --key` writes);
//! - ConfigMaps: a detached signature over the component bytes in the key `<key>.sig` (what
//!   `cosign sign-blob --key` prints).
//!
//! The artifact layout, signing and the payload format are `oci::signature`'s (re-exported here).
//!
//! Owns: verification. Must not touch: fetching (the caller hands in what it pulled).

use anyhow::{Context as _, bail};
use base64::Engine as _;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey};
use serde_json::Value;
use sha2::Digest as _;

pub use crate::oci::signature::{
    SIGNATURE_ANNOTATION, SIMPLE_SIGNING, payload, sign_blob, signature_tag,
};

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Refuses `bytes` unless their digest is `pin` (when there is a pin).
pub fn check_pin(bytes: &[u8], pin: Option<&str>) -> anyhow::Result<()> {
    let Some(pin) = pin.filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    if !pin.starts_with("sha256:") || pin.len() != 71 {
        bail!("digest pin {pin:?} is not sha256:<64 hex digits>");
    }
    let actual = digest_of(bytes);
    if actual != pin {
        bail!("digest mismatch: the plugin is {actual}, the pin is {pin}");
    }
    Ok(())
}

/// Public keys from PEM text (one or more `PUBLIC KEY` blocks).
pub fn public_keys(pem: &str) -> anyhow::Result<Vec<VerifyingKey>> {
    let mut keys = Vec::new();
    for block in pem.split_inclusive("-----END PUBLIC KEY-----") {
        let Some(start) = block.find("-----BEGIN PUBLIC KEY-----") else {
            continue;
        };
        keys.push(
            VerifyingKey::from_public_key_pem(block[start..].trim())
                .map_err(|e| anyhow::anyhow!("not an ECDSA P-256 public key (PEM): {e}"))?,
        );
    }
    if keys.is_empty() {
        bail!("no PEM public key found");
    }
    Ok(keys)
}

/// Whether `signature_b64` (DER, base64) over `message` verifies with one of `keys`.
pub fn verify_blob(message: &[u8], signature_b64: &str, keys: &[VerifyingKey]) -> bool {
    let Ok(der) = base64::engine::general_purpose::STANDARD.decode(signature_b64.trim()) else {
        return false;
    };
    let Ok(sig) = Signature::from_der(&der) else {
        return false;
    };
    keys.iter().any(|k| k.verify(message, &sig).is_ok())
}

/// Checks one signature layer: the payload names `manifest_digest` and the signature verifies.
pub fn verify_payload(
    payload: &[u8],
    signature_b64: &str,
    manifest_digest: &str,
    keys: &[VerifyingKey],
) -> anyhow::Result<()> {
    if !verify_blob(payload, signature_b64, keys) {
        bail!("the signature does not verify with the configured key(s)");
    }
    let v: Value = serde_json::from_slice(payload).context("signature payload is not JSON")?;
    let signed = v
        .pointer("/critical/image/docker-manifest-digest")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if signed != manifest_digest {
        bail!("the signature is for {signed}, not for {manifest_digest}");
    }
    Ok(())
}

/// A signing key from PKCS#8 PEM (`PRIVATE KEY`).
pub fn signing_key(pem: &str) -> anyhow::Result<SigningKey> {
    SigningKey::from_pkcs8_pem(pem.trim())
        .map_err(|e| anyhow::anyhow!("not an unencrypted PKCS#8 ECDSA P-256 private key: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};

    fn key_pair() -> (String, String) {
        let key = SigningKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
        let private = key.to_pkcs8_pem(LineEnding::LF).unwrap().to_string();
        let public = key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        (private, public)
    }

    #[test]
    fn pins_refuse_other_bytes() {
        let d = digest_of(b"abc");
        check_pin(b"abc", Some(&d)).unwrap();
        check_pin(b"abc", None).unwrap();
        let e = check_pin(b"abd", Some(&d)).unwrap_err().to_string();
        assert!(e.contains("digest mismatch"), "{e}");
        assert!(check_pin(b"abc", Some("sha256:12")).is_err());
    }

    #[test]
    fn signatures_verify_only_with_the_right_key_and_digest() {
        let (private, public) = key_pair();
        let (_, other_public) = key_pair();
        let key = signing_key(&private).unwrap();
        let keys = public_keys(&public).unwrap();
        let p = payload("127.0.0.1:5000/plugins/mock", "sha256:aa");
        let sig = sign_blob(&p, &key);
        verify_payload(&p, &sig, "sha256:aa", &keys).unwrap();
        let e = verify_payload(&p, &sig, "sha256:bb", &keys)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not for sha256:bb"), "{e}");
        let wrong = public_keys(&other_public).unwrap();
        assert!(verify_payload(&p, &sig, "sha256:aa", &wrong).is_err());
        // Two keys in one PEM text: either may have signed.
        let both = public_keys(&format!("{other_public}\n{public}")).unwrap();
        assert_eq!(both.len(), 2);
        assert!(verify_blob(b"blob", &sign_blob(b"blob", &key), &both));
        assert!(!verify_blob(b"blob", "bm90IGEgc2lnbmF0dXJl", &both));
        assert!(public_keys("nothing").is_err());
    }
}
