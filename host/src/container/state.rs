//! The state directory between runs (contract section 9.6): packed as tar+gzip, split into
//! Secrets of at most [`CHUNK`] bytes that share one backup UUID, and restored from the newest
//! complete backup.
//!
//! Owns: the byte format and choosing which backup to restore. Must not touch: the cluster (the
//! init and wait programs read and write the Secrets).

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use k8s_openapi::api::core::v1::Secret;

use super::pod::{ANNOTATION_COUNT, ANNOTATION_NUM, ANNOTATION_UUID};

/// Bytes per state Secret: under the API server's 1 MiB limit for a Secret's data, with room
/// for the rest of the object.
pub const CHUNK: usize = 768 * 1024;

/// Packs `dir`; `None` if it is missing or empty (nothing to keep).
pub fn pack(dir: &Path) -> io::Result<Option<Vec<u8>>> {
    if !dir.is_dir() || std::fs::read_dir(dir)?.next().is_none() {
        return Ok(None);
    }
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    tar.follow_symlinks(false);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.append_dir_all(".", dir)?;
    Ok(Some(tar.into_inner()?.finish()?))
}

/// Unpacks a backup into `dir` (created if missing). Entries cannot escape `dir`.
pub fn unpack(bytes: &[u8], dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    tar::Archive::new(GzDecoder::new(bytes)).unpack(dir)
}

fn annotation<'a>(s: &'a Secret, key: &str) -> Option<&'a str> {
    s.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The backup to restore: of the complete backups (every chunk present), the one whose newest
/// Secret is newest. Returns its UUID and the concatenated bytes.
pub fn newest_backup(secrets: &[Secret]) -> Option<(String, Vec<u8>)> {
    let mut groups: BTreeMap<&str, Vec<&Secret>> = BTreeMap::new();
    for s in secrets {
        if let Some(uuid) = annotation(s, ANNOTATION_UUID) {
            groups.entry(uuid).or_default().push(s);
        }
    }
    let num = |s: &Secret| annotation(s, ANNOTATION_NUM).and_then(|n| n.parse::<usize>().ok());
    groups
        .into_iter()
        .filter_map(|(uuid, mut chunks)| {
            chunks.sort_by_key(|s| num(s));
            let count = chunks
                .first()
                .and_then(|s| annotation(s, ANNOTATION_COUNT))
                .and_then(|n| n.parse::<usize>().ok())
                // Landscaper's own backups have no count: trust a gap-free sequence.
                .unwrap_or(chunks.len());
            let complete =
                chunks.len() == count && chunks.iter().enumerate().all(|(i, s)| num(s) == Some(i));
            if !complete {
                return None;
            }
            let newest = chunks
                .iter()
                .filter_map(|s| s.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .max();
            let bytes = chunks
                .iter()
                .flat_map(|s| {
                    s.data
                        .as_ref()
                        .and_then(|d| d.get("config"))
                        .map(|b| b.0.clone())
                        .unwrap_or_default()
                })
                .collect::<Vec<u8>>();
            Some((newest, uuid.to_string(), bytes))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)))
        .map(|(_, uuid, bytes)| (uuid, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use serde_json::json;

    #[test]
    fn a_directory_round_trips() {
        let src = tempfile::tempdir().unwrap();
        assert!(pack(src.path()).unwrap().is_none());
        std::fs::create_dir_all(src.path().join("sub")).unwrap();
        std::fs::write(src.path().join("sub/a.txt"), b"hello").unwrap();
        std::fs::write(src.path().join("counter"), b"3").unwrap();
        let bytes = pack(src.path()).unwrap().unwrap();
        let dst = tempfile::tempdir().unwrap();
        unpack(&bytes, dst.path()).unwrap();
        assert_eq!(
            std::fs::read(dst.path().join("sub/a.txt")).unwrap(),
            b"hello"
        );
        assert_eq!(std::fs::read(dst.path().join("counter")).unwrap(), b"3");
    }

    fn chunk(uuid: &str, num: usize, count: usize, at: &str, data: &[u8]) -> Secret {
        let mut s: Secret = serde_json::from_value(json!({"metadata": {
            "name": format!("{uuid}-{num}"), "creationTimestamp": at,
            "annotations": {ANNOTATION_UUID: uuid, ANNOTATION_NUM: num.to_string(), ANNOTATION_COUNT: count.to_string()}
        }}))
        .unwrap();
        s.data = Some([("config".to_string(), ByteString(data.to_vec()))].into());
        s
    }

    #[test]
    fn the_newest_complete_backup_wins() {
        let secrets = vec![
            chunk("old", 1, 2, "2026-01-01T00:00:01Z", b"cd"),
            chunk("old", 0, 2, "2026-01-01T00:00:00Z", b"ab"),
            // Newer, but a chunk is missing (the wait container died half-way).
            chunk("half", 0, 2, "2026-01-02T00:00:00Z", b"xx"),
        ];
        assert_eq!(
            newest_backup(&secrets),
            Some(("old".into(), b"abcd".to_vec()))
        );
        let mut more = secrets.clone();
        more.push(chunk("new", 0, 1, "2026-01-03T00:00:00Z", b"zz"));
        assert_eq!(newest_backup(&more).unwrap().0, "new");
        assert_eq!(newest_backup(&[]), None);
    }
}
