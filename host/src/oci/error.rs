//! Registry errors as plugins see them: Landscaper codes, operation `fetch` (the OCM capability
//! re-labels what it passes on as `ocm`).
//!
//! Owns: mapping transport and registry errors onto codes and reasons. Must not touch: what a
//! caller does about them.

use plugin_runtime::DeployerError;

use crate::landscaper::codes;

/// A download error: operation `fetch`, with `code` if given.
pub fn error(code: Option<&str>, reason: &str, message: String) -> DeployerError {
    DeployerError {
        codes: code.map(|c| vec![c.to_string()]).unwrap_or_default(),
        operation: "fetch".into(),
        reason: reason.into(),
        message,
        ..Default::default()
    }
}

/// Whether a transport error is a TLS certificate that was not accepted (unknown issuer,
/// wrong name, expired): a configuration problem that retrying the same job does not fix.
pub fn is_certificate_problem(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("invalid peer certificate") || t.contains("certificate verify failed")
}

/// An error and its sources, each once.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

/// A registry's answer to `what` (e.g. "pulling the manifest of") `reference`, as codes.
pub(super) fn registry_error(
    reference: &str,
    what: &str,
    e: oci_client::errors::OciDistributionError,
) -> DeployerError {
    use oci_client::errors::OciDistributionError as E;
    let text = error_chain(&e);
    let message = format!("{what} {reference}: {text}");
    if is_certificate_problem(&text) {
        return error(
            Some(codes::CONFIGURATION_PROBLEM),
            "UntrustedCertificate",
            format!(
                "{what} {reference}: the registry's TLS certificate is not trusted ({text}); give the CA that signed it as certificateAuthority of the registry's OCIRegistry credentials (the Context's .ocmcredentialconfig pull secret or ocmConfig), or the host's fetch.caBundle"
            ),
        );
    }
    match &e {
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => {
            error(Some(codes::UNAUTHORIZED), "Unauthorized", message)
        }
        E::ImageManifestNotFoundError(_) => error(None, "NotFound", message),
        E::RegistryError { envelope, .. }
            if envelope
                .errors
                .iter()
                .any(|x| format!("{:?}", x.code).contains("Unknown")) =>
        {
            error(None, "NotFound", message)
        }
        _ if text.contains("404") || text.to_lowercase().contains("not found") => {
            error(None, "NotFound", message)
        }
        _ if text.contains("401") || text.contains("403") => {
            error(Some(codes::UNAUTHORIZED), "Unauthorized", message)
        }
        _ => error(None, "FetchFailed", message),
    }
}
