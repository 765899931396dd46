//! Persistence for `--data-dir`: one append-only file `store.log`.
//!
//! Layout: the magic line `EAPISTORE1\n`, then records, each
//! `[u32 LE payload length][u32 LE CRC-32 of payload][payload JSON]`.
//! A payload is `{"rv":N,"r":"group/plural","ns":"..","n":"..","o":object|null}`
//! (`o: null` = deleted) or `{"rv":N}` (counter only). Every committed write is
//! appended (buffered, flushed per write); a clean stop or `flush()` rewrites
//! the file as a compact snapshot (temp file, fsync, rename, fsync dir).
//! On load, a short header, short payload, CRC mismatch or undecodable JSON is
//! an error naming the file and byte offset — nothing is loaded silently.
//! Beside it, `sa-token.key` keeps the key legacy ServiceAccount tokens are signed
//! with (see [`crate::tokens`]), so they outlive a restart as their Secrets do.

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

pub const FILE: &str = "store.log";
const MAGIC: &[u8] = b"EAPISTORE1\n";

/// One log record (owned, as loaded).
#[derive(Debug, Clone, Deserialize)]
pub struct Record {
    pub rv: u64,
    #[serde(default)]
    pub r: Option<String>,
    #[serde(default)]
    pub ns: String,
    #[serde(default)]
    pub n: String,
    #[serde(default)]
    pub o: Option<Value>,
}

/// One log record (borrowed, for writing).
#[derive(Serialize)]
pub struct RecordRef<'a> {
    pub rv: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub ns: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub n: &'a str,
    pub o: Option<&'a Value>,
}

pub fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    let mut c = 0xFFFF_FFFFu32;
    for b in data {
        c = t[((c ^ *b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    c ^ 0xFFFF_FFFF
}

fn encode(rec: &RecordRef<'_>) -> Vec<u8> {
    let payload = serde_json::to_vec(rec).expect("serialisable");
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Read every record of `dir/store.log` (empty if the file does not exist).
pub fn load(dir: &Path) -> anyhow::Result<Vec<Record>> {
    let path = dir.join(FILE);
    let mut buf = Vec::new();
    match File::open(&path) {
        Ok(mut f) => {
            f.read_to_end(&mut buf)
                .with_context(|| format!("reading {}", path.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    }
    if !buf.starts_with(MAGIC) {
        bail!(
            "{}: not an embedded-apiserver store (bad header at offset 0)",
            path.display()
        );
    }
    let mut off = MAGIC.len();
    let mut out = Vec::new();
    while off < buf.len() {
        let start = off;
        if buf.len() - off < 8 {
            bail!(
                "{}: torn record at offset {start}: header truncated ({} of 8 bytes); the previous run did not stop cleanly",
                path.display(),
                buf.len() - off
            );
        }
        let len = u32::from_le_bytes(buf[off..off + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(buf[off + 4..off + 8].try_into().expect("4 bytes"));
        off += 8;
        if buf.len() - off < len {
            bail!(
                "{}: torn record at offset {start}: payload truncated ({} of {len} bytes); the previous run did not stop cleanly",
                path.display(),
                buf.len() - off
            );
        }
        let payload = &buf[off..off + len];
        if crc32(payload) != crc {
            bail!(
                "{}: corrupt record at offset {start}: checksum mismatch",
                path.display()
            );
        }
        let rec: Record = serde_json::from_slice(payload).with_context(|| {
            format!(
                "{}: corrupt record at offset {start}: undecodable payload",
                path.display()
            )
        })?;
        out.push(rec);
        off += len;
    }
    Ok(out)
}

/// The open append log.
pub struct Log {
    dir: PathBuf,
    w: BufWriter<File>,
}

impl Log {
    pub fn append(&mut self, rec: &RecordRef<'_>) -> std::io::Result<()> {
        self.w.write_all(&encode(rec))?;
        self.w.flush()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn sync(&mut self) -> std::io::Result<()> {
        self.w.flush()?;
        self.w.get_ref().sync_all()
    }
}

/// Write a compact snapshot of `records` atomically and open it for appending.
pub fn write_snapshot<'a>(
    dir: &Path,
    records: impl Iterator<Item = RecordRef<'a>>,
) -> anyhow::Result<Log> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!("{FILE}.tmp"));
    let path = dir.join(FILE);
    {
        let f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut w = BufWriter::new(f);
        w.write_all(MAGIC)?;
        for r in records {
            w.write_all(&encode(&r))?;
        }
        w.flush()?;
        w.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, &path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    let f = OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Log {
        dir: dir.to_path_buf(),
        w: BufWriter::new(f),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_known_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
