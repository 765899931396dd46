//! `derivePassword` (Master Password, as Sprig) and its `uint32` counter argument. Owns: the
//! password templates. Must not touch: the other crypto functions.

use crate::template::FuncError;
use crate::value::Value;

pub(super) const MASTER_PASSWORD_SEED: &str = "com.lyndir.masterpassword";

pub(super) fn password_templates(typ: &str) -> Option<&'static [&'static str]> {
    Some(match typ {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

pub(super) fn template_chars(c: u8) -> &'static str {
    match c {
        b'V' => "AEIOU",
        b'C' => "BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => "aeiou",
        b'c' => "bcdfghjklmnpqrstvwxyz",
        b'A' => "AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => "AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => "0123456789",
        b'o' => "@&%?,=[]_:-+*$#!'^~;()/.",
        b'x' => "AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
        _ => "",
    }
}

/// Sprig `derivePassword`: the Master Password algorithm (scrypt N=32768, r=8, p=2, then
/// HMAC-SHA256 over the site, and a template of character classes).
pub(super) fn derive_password(
    counter: u32,
    typ: &str,
    password: &str,
    user: &str,
    site: &str,
) -> String {
    let Some(templates) = password_templates(typ) else {
        return format!("cannot find password template {typ}");
    };
    let mut salt = MASTER_PASSWORD_SEED.as_bytes().to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let params = match scrypt::Params::new(15, 8, 2, 64) {
        Ok(p) => p,
        Err(e) => return format!("failed to derive password: {e}"),
    };
    if let Err(e) = scrypt::scrypt(password.as_bytes(), &salt, &params, &mut key) {
        return format!("failed to derive password: {e}");
    }
    let mut msg = MASTER_PASSWORD_SEED.as_bytes().to_vec();
    msg.extend_from_slice(&(site.len() as u32).to_be_bytes());
    msg.extend_from_slice(site.as_bytes());
    msg.extend_from_slice(&counter.to_be_bytes());
    use hmac::Mac;
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password: hmac".into();
    };
    mac.update(&msg);
    let seed = mac.finalize().into_bytes();
    let tmpl = templates[seed[0] as usize % templates.len()].as_bytes();
    tmpl.iter()
        .enumerate()
        .map(|(i, c)| {
            let chars = template_chars(*c).as_bytes();
            chars[seed[i + 1] as usize % chars.len()] as char
        })
        .collect()
}

/// A `uint32` parameter (`derivePassword`'s counter).
pub(super) fn arg_u32(v: &Value) -> Result<u32, FuncError> {
    match v {
        Value::Int(i) => {
            u32::try_from(*i).map_err(|_| FuncError::Arg(format!("{i} overflows uint32")))
        }
        Value::Nil => Err(FuncError::Arg("invalid value; expected uint32".into())),
        o => Err(FuncError::Arg(format!(
            "wrong type for value; expected uint32; got {}",
            o.type_name()
        ))),
    }
}
