//! `encryptAES` / `decryptAES` (Sprig's AES-256-CBC with a SHA-256 key, base64 output) and
//! Go's base64 error text. Owns: that cipher. Must not touch: the other crypto functions.

use base64::Engine as _;

use super::random::random;

pub(super) fn aes_key(password: &str) -> aes::Aes256 {
    use aes::cipher::KeyInit;
    let mut key = [0u8; 32];
    let p = password.as_bytes();
    let n = p.len().min(32);
    key[..n].copy_from_slice(&p[..n]);
    aes::Aes256::new(&key.into())
}

/// Sprig `encryptAES`: AES-256-CBC, the key is the password zero-padded or cut to 32 bytes,
/// PKCS#7 padding, a random IV in front, base64.
pub(super) fn encrypt_aes(password: &str, plaintext: &str) -> String {
    use aes::cipher::BlockEncrypt;
    if plaintext.is_empty() {
        return String::new();
    }
    let cipher = aes_key(password);
    let mut content = plaintext.as_bytes().to_vec();
    let pad = 16 - content.len() % 16;
    content.extend(std::iter::repeat_n(pad as u8, pad));
    let iv = random::<16>();
    let mut out = iv.to_vec();
    let mut prev = iv;
    for chunk in content.chunks(16) {
        let mut block = [0u8; 16];
        for i in 0..16 {
            block[i] = chunk[i] ^ prev[i];
        }
        let mut b = block.into();
        cipher.encrypt_block(&mut b);
        prev = b.into();
        out.extend_from_slice(&prev);
    }
    base64::engine::general_purpose::STANDARD.encode(out)
}

/// Sprig `decryptAES` (the padding length is taken from the last byte unchecked, as Sprig does;
/// where Go would panic this returns an error).
pub(super) fn decrypt_aes(password: &str, crypt64: &str) -> Result<String, String> {
    use aes::cipher::BlockDecrypt;
    if crypt64.is_empty() {
        return Ok(String::new());
    }
    let crypt = base64::engine::general_purpose::STANDARD
        .decode(crypt64)
        .map_err(|e| go_base64_error(crypt64, e))?;
    if crypt.len() < 16 {
        return Err(format!(
            "runtime error: slice bounds out of range [:16] with capacity {}",
            crypt.len()
        ));
    }
    if crypt.len() % 16 != 0 {
        return Err("crypto/cipher: input not full blocks".into());
    }
    let cipher = aes_key(password);
    let mut prev: [u8; 16] = crypt[..16].try_into().unwrap_or_default();
    let mut plain = Vec::with_capacity(crypt.len() - 16);
    for chunk in crypt[16..].chunks(16) {
        let mut b: aes::Block = <[u8; 16]>::try_from(chunk).unwrap_or_default().into();
        cipher.decrypt_block(&mut b);
        for i in 0..16 {
            plain.push(b[i] ^ prev[i]);
        }
        prev = chunk.try_into().unwrap_or_default();
    }
    let Some(&last) = plain.last() else {
        return Err("runtime error: index out of range [-1]".into());
    };
    let keep = plain.len() as i64 - last as i64;
    if keep < 0 {
        return Err(format!(
            "runtime error: slice bounds out of range [:{keep}]"
        ));
    }
    plain.truncate(keep as usize);
    Ok(String::from_utf8_lossy(&plain).into_owned())
}

/// Go's `base64.CorruptInputError` text.
pub(super) fn go_base64_error(input: &str, e: base64::DecodeError) -> String {
    let off = match e {
        base64::DecodeError::InvalidByte(i, _) => i,
        base64::DecodeError::InvalidLastSymbol(i, _) => i,
        base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => {
            input.len().saturating_sub(input.len() % 4)
        }
    };
    format!("illegal base64 data at input byte {off}")
}
