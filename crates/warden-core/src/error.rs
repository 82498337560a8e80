//! The error taxonomy of the domain layer.

/// An input or transition the domain refuses. Each variant names what is wrong
/// so the layer above can turn it into a precise 4xx or CLI message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A field of a request is invalid; `field` is its wire name.
    #[error("invalid {field}: {message}")]
    InvalidField { field: String, message: String },
    /// A transition the state machine does not allow.
    #[error("invalid transition from {from} to {to}")]
    InvalidTransition { from: String, to: String },
    /// An id that does not parse.
    #[error("malformed id {0:?}: expected a UUID")]
    MalformedId(String),
}

impl CoreError {
    /// Shorthand for [`CoreError::InvalidField`].
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidField {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The field this error is about, when there is one.
    pub fn field_name(&self) -> Option<&str> {
        match self {
            Self::InvalidField { field, .. } => Some(field),
            Self::InvalidTransition { .. } | Self::MalformedId(_) => None,
        }
    }
}
