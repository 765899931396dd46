//! PEM as Go's `encoding/pem` writes and reads it. Owns: PEM framing. Must not touch: what the
//! DER inside means (`keys`, `x509`).

use base64::Engine as _;

/// Go's `pem.EncodeToMemory`: base64 in 64-column lines, LF endings.
pub(super) fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut s = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        s.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        s.push('\n');
    }
    s.push_str(&format!("-----END {label}-----\n"));
    s
}

/// Go's `pem.Decode` (first block; headers and surrounding text are skipped): type and bytes.
pub(super) fn pem_decode(s: &str) -> Option<(String, Vec<u8>)> {
    let mut rest = s;
    loop {
        let start = rest.find("-----BEGIN ")?;
        rest = &rest[start + 11..];
        let end_label = rest.find("-----")?;
        let label = rest[..end_label].to_string();
        let body_start = end_label + 5;
        let end_marker = format!("-----END {label}-----");
        let Some(end) = rest[body_start..].find(&end_marker) else {
            continue;
        };
        let body = &rest[body_start..body_start + end];
        // headers ("Key: value" lines followed by a blank line) are not part of the data
        let data: String = body
            .lines()
            .filter(|l| !l.contains(':'))
            .flat_map(|l| l.chars())
            .filter(|c| !c.is_whitespace())
            .collect();
        match base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) {
            Ok(b) => return Some((label, b)),
            Err(_) => {
                rest = &rest[body_start + end..];
                continue;
            }
        }
    }
}
