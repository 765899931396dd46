//! Tar archives (gzipped or not) as OCM stores them: descriptor layers, blueprints, artifact
//! sets.
//!
//! Owns: unpacking. Must not touch: what the files mean.

use std::collections::HashMap;
use std::io::Read as _;

use super::error::ArchiveError;

/// The files of a tar (gzipped or not), by path (directories omitted).
pub fn tar_files(data: &[u8]) -> Result<HashMap<String, Vec<u8>>, ArchiveError> {
    let plain;
    let bytes: &[u8] = if data.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(data)
            .read_to_end(&mut out)
            .map_err(ArchiveError::NotGzip)?;
        plain = out;
        &plain
    } else {
        data
    };
    let mut files = HashMap::new();
    let mut archive = tar::Archive::new(bytes);
    for entry in archive.entries().map_err(ArchiveError::NotTar)? {
        let mut entry = entry.map_err(ArchiveError::NotTar)?;
        let name = entry
            .path()
            .map_err(ArchiveError::EntryPath)?
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_string();
        if !entry.header().entry_type().is_file() || name.is_empty() {
            continue;
        }
        let mut content = Vec::new();
        entry
            .read_to_end(&mut content)
            .map_err(|source| ArchiveError::Entry {
                name: name.clone(),
                source,
            })?;
        files.insert(name, content);
    }
    Ok(files)
}

/// The file `name` of a descriptor tar.
pub(crate) fn file_in_tar(data: &[u8], name: &str) -> Result<Vec<u8>, ArchiveError> {
    tar_files(data)?
        .remove(name)
        .ok_or_else(|| ArchiveError::Missing(name.to_string()))
}
