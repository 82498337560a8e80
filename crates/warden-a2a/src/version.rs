//! The `A2A-Version` header: which protocol a request speaks.

use std::fmt;

use crate::WireError;

/// A protocol version warden serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    /// 0.3, also what a request without `A2A-Version` means.
    V0_3,
    /// 1.0 (following the 1.0.1 text where it differs from 1.0.0).
    V1_0,
}

impl ProtocolVersion {
    /// Parses the header (or query) value; absent or empty means 0.3 and the patch
    /// number is ignored. Anything else is refused: the caller answers
    /// `VersionNotSupportedError`, never a default.
    pub fn negotiate(value: Option<&str>) -> Result<Self, WireError> {
        // Absent or empty both mean 0.3 (spec §3.6.2).
        let Some(raw) = value.map(str::trim).filter(|v| !v.is_empty()) else {
            return Ok(Self::V0_3);
        };
        let mut parts = raw.split('.');
        let major = parts.next().unwrap_or_default();
        let minor = parts.next().unwrap_or("0");
        let patch_ok = parts
            .next()
            .is_none_or(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty());
        match (major, minor, patch_ok && parts.next().is_none()) {
            ("1", "0", true) => Ok(Self::V1_0),
            ("0", "3", true) => Ok(Self::V0_3),
            _ => Err(WireError::new(
                "A2A-Version",
                format!("A2A version {raw:?} is not supported; this server speaks 1.0 and 0.3"),
            )),
        }
    }

    /// The version as written in cards and headers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_3 => "0.3",
            Self::V1_0 => "1.0",
        }
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_means_0_3_patch_is_ignored_and_others_are_refused() {
        assert_eq!(ProtocolVersion::negotiate(None), Ok(ProtocolVersion::V0_3));
        assert_eq!(
            ProtocolVersion::negotiate(Some("1.0")),
            Ok(ProtocolVersion::V1_0)
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("1.0.1")),
            Ok(ProtocolVersion::V1_0)
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("1")),
            Ok(ProtocolVersion::V1_0)
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some(" 0.3 ")),
            Ok(ProtocolVersion::V0_3)
        );
        assert_eq!(
            ProtocolVersion::negotiate(Some("")),
            Ok(ProtocolVersion::V0_3)
        );
        for bad in ["99.0", "0.5", "1.1", "1.0.x", "1.0.1.2", "v1"] {
            let err = ProtocolVersion::negotiate(Some(bad)).unwrap_err();
            assert_eq!(err.field, "A2A-Version", "{bad}");
        }
    }
}
