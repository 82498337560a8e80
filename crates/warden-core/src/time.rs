//! Wall-clock timestamps: RFC 3339, millisecond precision, UTC.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, rendered as RFC 3339 (`…T…:…:….123Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The current time, truncated to milliseconds.
    pub fn now() -> Self {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        Self(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    /// From milliseconds since the epoch.
    pub fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the epoch.
    pub fn as_millis(&self) -> u64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = UNIX_EPOCH + Duration::from_millis(self.0);
        write!(f, "{}", humantime::format_rfc3339_millis(t))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let t = humantime::parse_rfc3339(&s).map_err(serde::de::Error::custom)?;
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map_err(serde::de::Error::custom)?
            .as_millis();
        Ok(Self(u64::try_from(ms).map_err(serde::de::Error::custom)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_rfc3339_with_millis() {
        let t = Timestamp::from_millis(1_778_310_802_123);
        assert_eq!(t.to_string(), "2026-05-09T07:13:22.123Z");
        let back: Timestamp = serde_json::from_str("\"2026-05-09T07:13:22.123Z\"").unwrap();
        assert_eq!(back, t);
    }
}
