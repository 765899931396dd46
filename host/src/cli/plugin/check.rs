//! One check of `plugin test`: its name, outcome and what was seen.

/// One check's outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub name: String,
    /// `pass`, `fail`, `warn` or `skip`.
    pub outcome: &'static str,
    pub detail: String,
}

impl Check {
    pub(super) fn new(name: &str, outcome: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            outcome,
            detail: detail.into(),
        }
    }
    pub(super) fn pass(name: &str, detail: impl Into<String>) -> Self {
        Self::new(name, "pass", detail)
    }
    pub(super) fn fail(name: &str, detail: impl Into<String>) -> Self {
        Self::new(name, "fail", detail)
    }
}
