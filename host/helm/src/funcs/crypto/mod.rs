//! Sprig's crypto functions (Sprig v3.3 `crypto.go`): `genPrivateKey`, `genCA`,
//! `genSelfSignedCert`, `genSignedCert` (and their `…WithKey` forms), `buildCustomCert`,
//! `derivePassword`, `encryptAES`/`decryptAES`, one file per topic: `keys`, `x509`
//! (certificates), `certificate` (Sprig's struct and arguments), `pem`, `random`, `password`,
//! `aes_cbc`. Owns: the function table. Must not touch: the template engine.
//!
//! Certificates are built the way Go's `x509.CreateCertificate` builds Sprig's templates: v3, a
//! random 128-bit serial, `CN` only, `KeyUsage` (critical), `ExtKeyUsage` serverAuth+clientAuth,
//! `BasicConstraints` (critical), a subject key id for CAs (truncated SHA-256, Go ≥ 1.25), the
//! CA's key id as authority key id, SANs (DNS names, then IPs). Keys are PEM in Go's formats:
//! PKCS#1 `RSA PRIVATE KEY`, SEC1 `EC PRIVATE KEY`, PKCS#8 `PRIVATE KEY` (ed25519). Everything is
//! pure Rust (RustCrypto) so it runs on wasm32-wasip2; randomness comes from `getrandom`.

mod aes_cbc;
mod certificate;
mod keys;
mod password;
mod pem;
mod random;
mod x509;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use super::args::{arg_int, arg_str, want};
use crate::template::{Func, FuncError};
use crate::value::Value;

use aes_cbc::{decrypt_aes, encrypt_aes};
use certificate::{arg_cert, cert_args};
use keys::{PrivKey, gen_private_key, parse_key_arg};
use password::{arg_u32, derive_password};
use x509::{build_custom_cert, gen_ca, gen_self_signed, gen_signed};

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    m.insert("genPrivateKey", |_, a| {
        want("genPrivateKey", a, 1)?;
        Ok(Value::from(gen_private_key(arg_str(&a[0])?)))
    });
    m.insert("derivePassword", |_, a| {
        want("derivePassword", a, 5)?;
        let counter = arg_u32(&a[0])?;
        Ok(Value::from(derive_password(
            counter,
            arg_str(&a[1])?,
            arg_str(&a[2])?,
            arg_str(&a[3])?,
            arg_str(&a[4])?,
        )))
    });
    m.insert("buildCustomCert", |_, a| {
        want("buildCustomCert", a, 2)?;
        build_custom_cert(arg_str(&a[0])?, arg_str(&a[1])?).map(Value::Obj)
    });
    m.insert("genCA", |_, a| {
        want("genCA", a, 2)?;
        let (cn, days) = (arg_str(&a[0])?, arg_int(&a[1])?);
        let key = PrivKey::rsa(2048).map_err(FuncError::call)?;
        gen_ca(cn, days, key)
    });
    m.insert("genCAWithKey", |_, a| {
        want("genCAWithKey", a, 3)?;
        let (cn, days) = (arg_str(&a[0])?, arg_int(&a[1])?);
        let key = parse_key_arg(arg_str(&a[2])?)?;
        gen_ca(cn, days, key)
    });
    m.insert("genSelfSignedCert", |_, a| {
        want("genSelfSignedCert", a, 4)?;
        let (cn, ips, dns, days) = cert_args(a)?;
        let key = PrivKey::rsa(2048).map_err(FuncError::call)?;
        gen_self_signed(cn, ips, dns, days, key)
    });
    m.insert("genSelfSignedCertWithKey", |_, a| {
        want("genSelfSignedCertWithKey", a, 5)?;
        let (cn, ips, dns, days) = cert_args(a)?;
        let key = parse_key_arg(arg_str(&a[4])?)?;
        gen_self_signed(cn, ips, dns, days, key)
    });
    m.insert("genSignedCert", |_, a| {
        want("genSignedCert", a, 5)?;
        let (cn, ips, dns, days) = cert_args(a)?;
        let ca = arg_cert(&a[4])?;
        let key = PrivKey::rsa(2048).map_err(FuncError::call)?;
        gen_signed(cn, ips, dns, days, &ca, key)
    });
    m.insert("genSignedCertWithKey", |_, a| {
        want("genSignedCertWithKey", a, 6)?;
        let (cn, ips, dns, days) = cert_args(a)?;
        let ca = arg_cert(&a[4])?;
        let key = parse_key_arg(arg_str(&a[5])?)?;
        gen_signed(cn, ips, dns, days, &ca, key)
    });
    m.insert("encryptAES", |_, a| {
        want("encryptAES", a, 2)?;
        Ok(Value::from(encrypt_aes(arg_str(&a[0])?, arg_str(&a[1])?)))
    });
    m.insert("decryptAES", |_, a| {
        want("decryptAES", a, 2)?;
        decrypt_aes(arg_str(&a[0])?, arg_str(&a[1])?)
            .map(Value::from)
            .map_err(FuncError::call)
    });
}
