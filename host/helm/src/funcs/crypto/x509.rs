//! Certificates as Go's `x509.CreateCertificate` builds Sprig's templates: `genCA`,
//! `genSelfSignedCert`, `genSignedCert` (and their keys), `buildCustomCert`. Owns: the
//! certificate template, extensions, validity and signing. Must not touch: key formats
//! (`keys`), PEM framing (`pem`).

use std::rc::Rc;

use base64::Engine as _;
use x509_cert::der::asn1::{
    BitString, GeneralizedTime, Ia5String, OctetString, PrintableStringRef, UtcTime, Utf8StringRef,
};
use x509_cert::der::{Any, Decode, Encode};
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, SubjectAltName,
    SubjectKeyIdentifier,
};
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{ObjectIdentifier, SubjectPublicKeyInfoOwned};
use x509_cert::time::{Time, Validity};
use x509_cert::{Certificate, TbsCertificate, Version};

use super::super::args::FR;
use super::certificate::{SprigCertificate, cert_value};
use super::keys::{NOT_A_SIGNER, PrivKey};
use super::pem::{pem_decode, pem_encode};
use super::random::random;
use crate::template::FuncError;
use crate::value::{Object, Value};

/// Sprig's `getBaseCertTemplate` plus the CA overrides.
pub(super) struct Template {
    cn: String,
    ips: Vec<Vec<u8>>,
    dns: Vec<String>,
    days: i64,
    is_ca: bool,
}

pub(super) fn base_template(
    cn: &str,
    ips: &[Value],
    dns: &[Value],
    days: i64,
) -> Result<Template, FuncError> {
    let mut ip_bytes = Vec::new();
    for ip in ips {
        let Value::Str(s) = ip else {
            return Err(FuncError::call(format!(
                "error parsing ip: {} is not a string",
                ip.to_go_string()
            )));
        };
        ip_bytes
            .push(parse_ip(s).ok_or_else(|| FuncError::call(format!("error parsing ip: {s}")))?);
    }
    let mut names = Vec::new();
    for d in dns {
        let Value::Str(s) = d else {
            return Err(FuncError::call(format!(
                "error processing alternate dns name: {} is not a string",
                d.to_go_string()
            )));
        };
        names.push(s.to_string());
    }
    Ok(Template {
        cn: cn.to_string(),
        ips: ip_bytes,
        dns: names,
        days,
        is_ca: false,
    })
}

/// Go's `net.ParseIP` then the 4-byte form for IPv4 (as `x509` marshals it).
pub(super) fn parse_ip(s: &str) -> Option<Vec<u8>> {
    match s.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(v4) => Some(v4.octets().to_vec()),
        std::net::IpAddr::V6(v6) => Some(match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets().to_vec(),
            None => v6.octets().to_vec(),
        }),
    }
}

/// Go's `pkix.Name{CommonName: cn}.ToRDNSequence()` (an empty CN is left out); the string is a
/// PrintableString when it can be one, UTF8String otherwise (as `encoding/asn1` marshals).
pub(super) fn cn_name(cn: &str) -> Result<Name, String> {
    if cn.is_empty() {
        return Ok(RdnSequence(Vec::new()));
    }
    let value = match PrintableStringRef::new(cn) {
        Ok(p) => Any::encode_from(&p),
        Err(_) => Any::encode_from(&Utf8StringRef::new(cn).map_err(|e| e.to_string())?),
    }
    .map_err(|e| e.to_string())?;
    let atv = x509_cert::attr::AttributeTypeAndValue {
        oid: ObjectIdentifier::new_unwrap("2.5.4.3"),
        value,
    };
    let rdn = RelativeDistinguishedName::try_from(vec![atv]).map_err(|e| e.to_string())?;
    Ok(RdnSequence(vec![rdn]))
}

/// Go's `time.Time` in a certificate: UTCTime for 1950–2049, GeneralizedTime otherwise.
pub(super) fn cert_time(unix: i64) -> Result<Time, String> {
    if unix < 0 {
        return Err("x509: certificate times before 1970 are not supported by helm-engine".into());
    }
    let d = std::time::Duration::from_secs(unix as u64);
    // 2050-01-01T00:00:00Z
    if unix < 2_524_608_000 {
        Ok(Time::UtcTime(
            UtcTime::from_unix_duration(d).map_err(|e| e.to_string())?,
        ))
    } else {
        Ok(Time::GeneralTime(
            GeneralizedTime::from_unix_duration(d).map_err(|e| e.to_string())?,
        ))
    }
}

pub(super) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub(super) fn ext(oid: &str, critical: bool, value: &impl Encode) -> Result<Extension, String> {
    Ok(Extension {
        extn_id: ObjectIdentifier::new_unwrap(oid),
        critical,
        extn_value: OctetString::new(value.to_der().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?,
    })
}

/// Go's `x509.CreateCertificate(rand, template, parent, pub, signer)` for Sprig's templates.
/// `issuer` is the parent's subject and subject key id (`None`: self-signed).
pub(super) fn create_certificate(
    t: &Template,
    subject_key: &PrivKey,
    issuer: Option<(&Name, Option<&[u8]>)>,
    signer: &PrivKey,
) -> Result<String, String> {
    if matches!(signer, PrivKey::Dsa(_)) {
        return Err(NOT_A_SIGNER.into());
    }
    let subject = cn_name(&t.cn)?;
    let spki = subject_key.spki()?;
    let serial = SerialNumber::new(&random::<16>()).map_err(|e| e.to_string())?;
    let now = now_unix();
    let validity = validity(now, t.days)?;
    let (issuer_name, parent_skid) = match issuer {
        Some((n, k)) => (n.clone(), k),
        None => (subject.clone(), None),
    };
    let self_issued = issuer_name.to_der().map_err(|e| e.to_string())?
        == subject.to_der().map_err(|e| e.to_string())?;

    let exts = extensions(t, &subject, &spki, self_issued, parent_skid)?;

    let alg = signer.signature_algorithm();
    let tbs = TbsCertificate {
        version: Version::V3,
        serial_number: serial,
        signature: alg.clone(),
        issuer: issuer_name,
        validity,
        subject,
        subject_public_key_info: spki,
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(exts),
    };
    let tbs_der = tbs.to_der().map_err(|e| e.to_string())?;
    let sig = signer.sign(&tbs_der)?;
    let cert = Certificate {
        tbs_certificate: tbs,
        signature_algorithm: alg,
        signature: BitString::from_bytes(&sig).map_err(|e| e.to_string())?,
    };
    let der = cert.to_der().map_err(|e| e.to_string())?;
    Ok(pem_encode("CERTIFICATE", &der))
}

/// Validity from `now` for `days` days.
fn validity(now: i64, days: i64) -> Result<Validity, String> {
    let not_after = now
        .checked_add(days.checked_mul(86_400).ok_or("x509: validity overflows")?)
        .ok_or("x509: validity overflows")?;
    Ok(Validity {
        not_before: cert_time(now)?,
        not_after: cert_time(not_after)?,
    })
}

/// Sprig's extensions: KeyUsage, ExtKeyUsage, BasicConstraints, the subject key id of a CA,
/// the issuer's key id, SANs (DNS names, then IPs).
fn extensions(
    t: &Template,
    subject: &Name,
    spki: &SubjectPublicKeyInfoOwned,
    self_issued: bool,
    parent_skid: Option<&[u8]>,
) -> Result<Vec<Extension>, String> {
    let mut exts = Vec::new();
    // KeyUsage: digitalSignature | keyEncipherment (| keyCertSign for a CA), as Go's bit string.
    let ku = if t.is_ca {
        BitString::new(2, vec![0xa4])
    } else {
        BitString::new(5, vec![0xa0])
    }
    .map_err(|e| e.to_string())?;
    exts.push(ext("2.5.29.15", true, &ku)?);
    exts.push(ext(
        "2.5.29.37",
        false,
        &ExtendedKeyUsage(vec![
            ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1"),
            ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2"),
        ]),
    )?);
    exts.push(ext(
        "2.5.29.19",
        true,
        &BasicConstraints {
            ca: t.is_ca,
            path_len_constraint: None,
        },
    )?);
    let skid = if t.is_ca {
        // Go ≥ 1.25: the first 20 bytes of SHA-256 over the subjectPublicKey bits.
        use sha2::Digest;
        let h = sha2::Sha256::digest(spki.subject_public_key.raw_bytes());
        Some(h[..20].to_vec())
    } else {
        None
    };
    if let Some(k) = &skid {
        exts.push(ext(
            "2.5.29.14",
            false,
            &SubjectKeyIdentifier(OctetString::new(k.clone()).map_err(|e| e.to_string())?),
        )?);
    }
    if !self_issued && let Some(k) = parent_skid.filter(|k| !k.is_empty()) {
        exts.push(ext(
            "2.5.29.35",
            false,
            &AuthorityKeyIdentifier {
                key_identifier: Some(OctetString::new(k.to_vec()).map_err(|e| e.to_string())?),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
        )?);
    }
    if !t.dns.is_empty() || !t.ips.is_empty() {
        let mut names = Vec::new();
        for d in &t.dns {
            names.push(GeneralName::DnsName(Ia5String::new(d).map_err(|_| {
                format!("x509: {d:?} cannot be encoded as an IA5String")
            })?));
        }
        for ip in &t.ips {
            names.push(GeneralName::IpAddress(
                OctetString::new(ip.clone()).map_err(|e| e.to_string())?,
            ));
        }
        let critical = subject.0.is_empty();
        exts.push(ext("2.5.29.17", critical, &SubjectAltName(names))?);
    }
    Ok(exts)
}

pub(super) fn finish(
    t: &Template,
    key: &PrivKey,
    issuer: Option<(&Name, Option<&[u8]>)>,
    signer: &PrivKey,
) -> FR {
    let cert = create_certificate(t, key, issuer, signer)
        .map_err(|e| FuncError::call(format!("error creating certificate: {e}")))?;
    let key = key
        .to_pem()
        .map_err(|e| FuncError::call(format!("error pem-encoding key: {e}")))?;
    Ok(cert_value(cert, key))
}

pub(super) fn gen_ca(cn: &str, days: i64, key: PrivKey) -> FR {
    let mut t = base_template(cn, &[], &[], days)?;
    t.is_ca = true;
    finish(&t, &key, None, &key)
}

pub(super) fn gen_self_signed(
    cn: &str,
    ips: Vec<Value>,
    dns: Vec<Value>,
    days: i64,
    key: PrivKey,
) -> FR {
    let t = base_template(cn, &ips, &dns, days)?;
    finish(&t, &key, None, &key)
}

pub(super) fn gen_signed(
    cn: &str,
    ips: Vec<Value>,
    dns: Vec<Value>,
    days: i64,
    ca: &(String, String),
    key: PrivKey,
) -> FR {
    let Some((_, ca_der)) = pem_decode(&ca.0) else {
        return Err(FuncError::call("unable to decode certificate"));
    };
    let ca_cert = Certificate::from_der(&ca_der).map_err(|e| {
        FuncError::call(format!(
            "error parsing certificate: decodedSignerCert.Bytes: {e}"
        ))
    })?;
    let ca_key = PrivKey::parse_pem(&ca.1)
        .map_err(|e| FuncError::call(format!("error parsing private key: {e}")))?;
    let t = base_template(cn, &ips, &dns, days)?;
    let tbs = &ca_cert.tbs_certificate;
    let skid = tbs.extensions.iter().flatten().find_map(|e| {
        (e.extn_id == ObjectIdentifier::new_unwrap("2.5.29.14"))
            .then(|| SubjectKeyIdentifier::from_der(e.extn_value.as_bytes()).ok())
            .flatten()
            .map(|k| k.0.as_bytes().to_vec())
    });
    finish(&t, &key, Some((&tbs.subject, skid.as_deref())), &ca_key)
}

pub(super) fn build_custom_cert(b64cert: &str, b64key: &str) -> Result<Rc<dyn Object>, FuncError> {
    let b64 = &base64::engine::general_purpose::STANDARD;
    let cert = b64
        .decode(b64cert)
        .map_err(|_| FuncError::call("unable to decode base64 certificate"))?;
    let key = b64
        .decode(b64key)
        .map_err(|_| FuncError::call("unable to decode base64 private key"))?;
    let cert = String::from_utf8_lossy(&cert).into_owned();
    let key = String::from_utf8_lossy(&key).into_owned();
    let Some((_, der)) = pem_decode(&cert) else {
        return Err(FuncError::call("unable to decode certificate"));
    };
    Certificate::from_der(&der).map_err(|e| {
        FuncError::call(format!("error parsing certificate: decodedCert.Bytes: {e}"))
    })?;
    PrivKey::parse_pem(&key)
        .map_err(|e| FuncError::call(format!("error parsing private key: {e}")))?;
    Ok(Rc::new(SprigCertificate { cert, key }))
}
