//! OCM (Open Component Model) component versions in OCI registries, read by the host for
//! plugins (WIT `ocm`, 1.3) and for the host's own deployers: Landscaper's global resource keys
//! (`getResourceKey`), the Context's `repositoryContext`, component descriptors (schema v2 and
//! v3), and resource content through the access types `localBlob`, `ociArtifact`/`ociImage` and `helm`.
//! Written from the OCM specification and the OCM Go library Landscaper vendors (no maintained
//! Rust crate reads OCM); docs/ocm.md says what is supported.
//!
//! Owns: turning a resource key into bytes — which repository, which OCI reference
//! ([`repository`]), what the descriptor says ([`descriptor`]), which resource ([`key`]), and
//! what went wrong ([`Error`], one type for the room).
//! Must not touch: the network itself, credentials, the allowlist, limits or the cache — every
//! registry request goes through an [`oci::Session`](crate::oci::Session), and a classic Helm
//! repository's downloads through the [`ChartDownloads`] the caller gives; nor what the bytes
//! mean (a chart is the helm plugin's business).

pub mod access;
pub mod descriptor;
mod error;
pub mod key;
mod reader;
pub mod repository;
pub mod tar;

pub use error::{
    AccessError, ArchiveError, ArtifactSetError, ComponentVersionError, CredentialsHint,
    DescriptorError, Error, KeyError, OPERATION, RepositoryContextError, Subject,
};
pub use reader::{ChartDownloads, ComponentVersion, Reader};
pub use tar::tar_files;
