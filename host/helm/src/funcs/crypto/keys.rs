//! Private keys in Go's formats (PKCS#1 RSA, SEC1 EC, PKCS#8 ed25519; DSA read only):
//! generating (`genPrivateKey`), parsing, their public key info and signing. Owns: key
//! material. Must not touch: certificates (`x509`).

use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey};
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey};
use x509_cert::der::{Any, Decode};
use x509_cert::spki::{AlgorithmIdentifierOwned, ObjectIdentifier, SubjectPublicKeyInfoOwned};

use super::pem::{pem_decode, pem_encode};
use super::random::{SysRng, random};
use crate::template::FuncError;

pub(super) const OID_RSA_ENCRYPTION: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
pub(super) const OID_SHA256_WITH_RSA: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
pub(super) const OID_EC_PUBLIC_KEY: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
pub(super) const OID_ECDSA_WITH_SHA256: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
pub(super) const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

pub(super) const NOT_A_SIGNER: &str =
    "x509: certificate private key does not implement crypto.Signer";

/// Appends a DER TLV (definite length).
pub(super) fn der_tlv(out: &mut Vec<u8>, tag: u8, v: &[u8]) {
    out.push(tag);
    let n = v.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let b = n.to_be_bytes();
        let skip = b.iter().take_while(|x| **x == 0).count();
        out.push(0x80 | (b.len() - skip) as u8);
        out.extend_from_slice(&b[skip..]);
    }
    out.extend_from_slice(v);
}

/// The number of INTEGERs in a DER `SEQUENCE` of INTEGERs (`None` if it is not one).
pub(super) fn der_integers(der: &[u8]) -> Option<usize> {
    fn read(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = b.split_first()?;
        let (&l, mut rest) = rest.split_first()?;
        let len = if l < 0x80 {
            l as usize
        } else {
            let n = (l & 0x7f) as usize;
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n].iter().fold(0usize, |a, b| (a << 8) | *b as usize);
            rest = &rest[n..];
            len
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }
    let (tag, mut body, rest) = read(der)?;
    if tag != 0x30 || !rest.is_empty() {
        return None;
    }
    let mut n = 0;
    while !body.is_empty() {
        let (t, _, r) = read(body)?;
        if t != 0x02 {
            return None;
        }
        body = r;
        n += 1;
    }
    Some(n)
}

/// A private key of one of the types Sprig generates.
pub(super) enum PrivKey {
    Rsa(Box<rsa::RsaPrivateKey>),
    Ec(p256::SecretKey),
    Ed(Box<ed25519_dalek::SigningKey>),
    /// Go's `DSAKeyFormat` DER (`SEQUENCE { 0, P, Q, G, Y, X }`): it can be generated and read,
    /// but Go's x509 can neither sign with DSA nor certify a DSA key.
    Dsa(Vec<u8>),
}

impl PrivKey {
    pub(super) fn rsa(bits: usize) -> Result<PrivKey, String> {
        rsa::RsaPrivateKey::new(&mut SysRng, bits)
            .map(|k| PrivKey::Rsa(Box::new(k)))
            .map_err(|e| format!("error generating rsa key: {e}"))
    }

    pub(super) fn ecdsa() -> PrivKey {
        PrivKey::Ec(p256::SecretKey::random(&mut SysRng))
    }

    /// Sprig: `dsa.GenerateParameters(L2048N256)` then `dsa.GenerateKey`.
    pub(super) fn dsa() -> PrivKey {
        let c = dsa::Components::generate(&mut SysRng, dsa::KeySize::DSA_2048_256);
        let k = dsa::SigningKey::generate(&mut SysRng, c);
        let vk = k.verifying_key();
        let c = vk.components();
        let ints = [
            Vec::from([0u8]),
            c.p().to_bytes_be(),
            c.q().to_bytes_be(),
            c.g().to_bytes_be(),
            vk.y().to_bytes_be(),
            k.x().to_bytes_be(),
        ];
        let mut body = Vec::new();
        for i in ints {
            let mut v = i;
            if v.first().is_some_and(|b| b & 0x80 != 0) {
                v.insert(0, 0);
            }
            der_tlv(&mut body, 0x02, &v);
        }
        let mut der = Vec::new();
        der_tlv(&mut der, 0x30, &body);
        PrivKey::Dsa(der)
    }

    pub(super) fn ed25519() -> PrivKey {
        PrivKey::Ed(Box::new(ed25519_dalek::SigningKey::from_bytes(
            &random::<32>(),
        )))
    }

    /// Go's `pemBlockForKey`.
    pub(super) fn to_pem(&self) -> Result<String, String> {
        Ok(match self {
            PrivKey::Rsa(k) => {
                let der = k.to_pkcs1_der().map_err(|e| e.to_string())?;
                pem_encode("RSA PRIVATE KEY", der.as_bytes())
            }
            PrivKey::Ec(k) => {
                // Go's MarshalECPrivateKey: SEC1 with the named curve and the public point.
                use p256::elliptic_curve::sec1::ToEncodedPoint;
                let mut der = vec![0x30, 0x77, 0x02, 0x01, 0x01, 0x04, 0x20];
                der.extend_from_slice(&k.to_bytes());
                der.extend_from_slice(&[
                    0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0xa1,
                    0x44, 0x03, 0x42, 0x00,
                ]);
                der.extend_from_slice(k.public_key().to_encoded_point(false).as_bytes());
                pem_encode("EC PRIVATE KEY", &der)
            }
            PrivKey::Ed(k) => {
                // Go's MarshalPKCS8PrivateKey: v1 PrivateKeyInfo, no public key.
                let mut der = vec![
                    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04,
                    0x22, 0x04, 0x20,
                ];
                der.extend_from_slice(&k.to_bytes());
                pem_encode("PRIVATE KEY", &der)
            }
            PrivKey::Dsa(der) => pem_encode("DSA PRIVATE KEY", der),
        })
    }

    /// Go's `parsePrivateKeyPEM` (DSA keys are not supported here).
    pub(super) fn parse_pem(pem: &str) -> Result<PrivKey, String> {
        let (typ, der) = pem_decode(pem).ok_or("no PEM data in input")?;
        if typ == "PRIVATE KEY" {
            return Self::parse_pkcs8(&der).map_err(|e| format!("decoding PEM as PKCS#8: {e}"));
        }
        let Some(kind) = typ.strip_suffix(" PRIVATE KEY") else {
            return Err(format!("no private key data in PEM block of type {typ}"));
        };
        match kind {
            "RSA" => rsa::RsaPrivateKey::from_pkcs1_der(&der)
                .map(|k| PrivKey::Rsa(Box::new(k)))
                .map_err(|e| format!("parsing RSA private key from PEM: {e}")),
            "EC" => p256::SecretKey::from_sec1_der(&der)
                .map(PrivKey::Ec)
                .map_err(|e| {
                    format!("parsing EC private key from PEM: {e} (only P-256 is supported)")
                }),
            "DSA" => match der_integers(&der) {
                Some(6) => Ok(PrivKey::Dsa(der)),
                Some(n) if n < 6 => Err(
                    "parsing DSA private key from PEM: asn1: syntax error: sequence truncated"
                        .into(),
                ),
                _ => Err("parsing DSA private key from PEM: asn1: structure error".into()),
            },
            _ => Err(format!("invalid private key type {typ}")),
        }
    }

    pub(super) fn parse_pkcs8(der: &[u8]) -> Result<PrivKey, String> {
        let info = p256::pkcs8::PrivateKeyInfo::try_from(der).map_err(|e| e.to_string())?;
        let oid = info.algorithm.oid;
        if oid == OID_RSA_ENCRYPTION {
            rsa::RsaPrivateKey::from_pkcs8_der(der)
                .map(|k| PrivKey::Rsa(Box::new(k)))
                .map_err(|e| e.to_string())
        } else if oid == OID_EC_PUBLIC_KEY {
            p256::SecretKey::from_pkcs8_der(der)
                .map(PrivKey::Ec)
                .map_err(|e| format!("{e} (only P-256 is supported)"))
        } else if oid == OID_ED25519 {
            let seed = x509_cert::der::asn1::OctetStringRef::from_der(info.private_key)
                .map_err(|e| e.to_string())?;
            let seed: [u8; 32] = seed
                .as_bytes()
                .try_into()
                .map_err(|_| "invalid Ed25519 private key".to_string())?;
            Ok(PrivKey::Ed(Box::new(
                ed25519_dalek::SigningKey::from_bytes(&seed),
            )))
        } else {
            Err(format!(
                "x509: PKCS#8 wrapping contained private key with unknown algorithm: {oid}"
            ))
        }
    }

    /// The DER `SubjectPublicKeyInfo` of the public key.
    pub(super) fn spki(&self) -> Result<SubjectPublicKeyInfoOwned, String> {
        let der = match self {
            PrivKey::Rsa(k) => k
                .to_public_key()
                .to_public_key_der()
                .map_err(|e| e.to_string())?
                .into_vec(),
            PrivKey::Ec(k) => k
                .public_key()
                .to_public_key_der()
                .map_err(|e| e.to_string())?
                .into_vec(),
            PrivKey::Ed(k) => {
                let mut der = vec![
                    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
                ];
                der.extend_from_slice(k.verifying_key().as_bytes());
                der
            }
            PrivKey::Dsa(_) => {
                return Err("x509: unsupported public key type: *dsa.PublicKey".into());
            }
        };
        SubjectPublicKeyInfoOwned::from_der(&der).map_err(|e| e.to_string())
    }

    /// The signature algorithm Go picks for the signing key.
    pub(super) fn signature_algorithm(&self) -> AlgorithmIdentifierOwned {
        match self {
            PrivKey::Rsa(_) => AlgorithmIdentifierOwned {
                oid: OID_SHA256_WITH_RSA,
                parameters: Some(Any::null()),
            },
            PrivKey::Ec(_) => AlgorithmIdentifierOwned {
                oid: OID_ECDSA_WITH_SHA256,
                parameters: None,
            },
            PrivKey::Ed(_) | PrivKey::Dsa(_) => AlgorithmIdentifierOwned {
                oid: OID_ED25519,
                parameters: None,
            },
        }
    }

    pub(super) fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, String> {
        Ok(match self {
            PrivKey::Rsa(k) => {
                use rsa::signature::{SignatureEncoding, Signer};
                let sk = rsa::pkcs1v15::SigningKey::<sha2::Sha256>::new((**k).clone());
                sk.try_sign(msg).map_err(|e| e.to_string())?.to_vec()
            }
            PrivKey::Ec(k) => {
                use p256::ecdsa::signature::Signer;
                let sk = p256::ecdsa::SigningKey::from(k);
                let sig: p256::ecdsa::Signature = sk.try_sign(msg).map_err(|e| e.to_string())?;
                sig.to_der().as_bytes().to_vec()
            }
            PrivKey::Ed(k) => {
                use ed25519_dalek::Signer;
                k.sign(msg).to_bytes().to_vec()
            }
            PrivKey::Dsa(_) => return Err(NOT_A_SIGNER.into()),
        })
    }
}

/// Sprig `genPrivateKey`: errors come back as the result string, as in Sprig.
pub(super) fn gen_private_key(typ: &str) -> String {
    let key = match typ {
        "" | "rsa" => match PrivKey::rsa(4096) {
            Ok(k) => k,
            Err(e) => return format!("failed to generate private key: {e}"),
        },
        "ecdsa" => PrivKey::ecdsa(),
        "ed25519" => PrivKey::ed25519(),
        "dsa" => PrivKey::dsa(),
        _ => return format!("Unknown type {typ}"),
    };
    key.to_pem().unwrap_or_default()
}

pub(super) fn parse_key_arg(pem: &str) -> Result<PrivKey, FuncError> {
    PrivKey::parse_pem(pem).map_err(|e| FuncError::call(format!("parsing private key: {e}")))
}
