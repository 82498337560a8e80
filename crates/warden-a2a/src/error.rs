//! Why a wire value could not become a domain value.

/// A request or value that is well-formed JSON but not a valid A2A value.
/// `field` is the JSON path of the offending field, for `InvalidParams` errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct WireError {
    /// The offending field, e.g. `message.parts[0]`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl WireError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error, with `prefix.` put in front of its field path.
    pub fn within(self, prefix: &str) -> Self {
        Self {
            field: format!("{prefix}.{}", self.field),
            message: self.message,
        }
    }
}
