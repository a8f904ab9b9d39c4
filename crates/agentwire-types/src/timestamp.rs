//! `google.protobuf.Timestamp` with the A2A JSON form: RFC 3339 in UTC with a
//! `Z` suffix and millisecond precision (spec 5.6.1).

use std::fmt;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};

/// A point in time, as seconds and nanoseconds since the Unix epoch (UTC).
///
/// On the wire (protobuf) it is `google.protobuf.Timestamp`; in JSON it is an
/// RFC 3339 string in UTC ending in `Z`, e.g. `"2025-10-28T10:30:00.000Z"`.
/// Parsing accepts any RFC 3339 offset and normalises it to UTC.
///
/// ```
/// use agentwire_types::Timestamp;
/// let t: Timestamp = serde_json::from_str("\"2025-10-28T12:30:00+02:00\"").unwrap();
/// assert_eq!(serde_json::to_string(&t).unwrap(), "\"2025-10-28T10:30:00.000Z\"");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Message)]
pub struct Timestamp {
    /// Seconds since the Unix epoch.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Non-negative fraction of a second, in nanoseconds (0..=999_999_999).
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The current time, truncated to milliseconds.
    pub fn now() -> Self {
        // The system clock directly: no calendar arithmetic on a hot path.
        match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => Self::from_millis(d.as_millis() as i64),
            Err(e) => Self::from_millis(-(e.duration().as_millis() as i64)),
        }
    }

    /// A timestamp from milliseconds since the Unix epoch.
    pub fn from_millis(millis: i64) -> Self {
        Self {
            seconds: millis.div_euclid(1000),
            nanos: (millis.rem_euclid(1000) * 1_000_000) as i32,
        }
    }

    /// Milliseconds since the Unix epoch (sub-millisecond precision dropped).
    pub fn as_millis(&self) -> i64 {
        self.seconds * 1000 + i64::from(self.nanos) / 1_000_000
    }

    /// Converts to a chrono UTC date-time; `None` when out of range.
    pub fn to_datetime(&self) -> Option<DateTime<Utc>> {
        let nanos = u32::try_from(self.nanos).ok()?;
        Utc.timestamp_opt(self.seconds, nanos).single()
    }

    /// Parses an RFC 3339 / ISO 8601 date-time with an offset.
    pub fn parse(s: &str) -> Result<Self, chrono::ParseError> {
        DateTime::parse_from_rfc3339(s).map(|d| Self::from(d.with_timezone(&Utc)))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(d: DateTime<Utc>) -> Self {
        Self {
            seconds: d.timestamp(),
            nanos: d.timestamp_subsec_nanos() as i32,
        }
    }
}

/// Writes `n` as `width` decimal digits (zero-padded) at `out[at..]`.
fn put_digits(out: &mut [u8], at: usize, width: usize, mut n: u32) {
    for i in (0..width).rev() {
        out[at + i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

impl Timestamp {
    /// The RFC 3339 form of a timestamp of the years 0..=9999 (all real
    /// ones), written without the string chrono would allocate: every task,
    /// status and event carries a timestamp. The text is `buf[..len]`.
    pub(crate) fn rfc3339_bytes(&self) -> Option<([u8; 30], usize)> {
        use chrono::{Datelike, Timelike};
        let d = self.to_datetime()?;
        if !(0..=9999).contains(&d.year()) || d.nanosecond() >= 1_000_000_000 {
            return None;
        }
        let nanos = d.nanosecond();
        let (digits, frac) = if nanos % 1_000_000 == 0 {
            (3, nanos / 1_000_000)
        } else if nanos % 1000 == 0 {
            (6, nanos / 1000)
        } else {
            (9, nanos)
        };
        let mut out = *b"0000-00-00T00:00:00.000000000Z";
        put_digits(&mut out, 0, 4, d.year() as u32);
        put_digits(&mut out, 5, 2, d.month());
        put_digits(&mut out, 8, 2, d.day());
        put_digits(&mut out, 11, 2, d.hour());
        put_digits(&mut out, 14, 2, d.minute());
        put_digits(&mut out, 17, 2, d.second());
        put_digits(&mut out, 20, digits, frac);
        out[20 + digits] = b'Z';
        Some((out, 21 + digits))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((buf, len)) = self.rfc3339_bytes() {
            let text = std::str::from_utf8(&buf[..len]).map_err(|_| fmt::Error)?;
            return f.write_str(text);
        }
        match self.to_datetime() {
            Some(d) => {
                let format = if self.nanos % 1_000_000 == 0 {
                    SecondsFormat::Millis
                } else {
                    SecondsFormat::AutoSi
                };
                f.write_str(&d.to_rfc3339_opts(format, true))
            }
            None => write!(f, "<invalid timestamp {}s {}ns>", self.seconds, self.nanos),
        }
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.to_datetime().is_none() {
            return Err(serde::ser::Error::custom("timestamp out of range"));
        }
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp string such as \"2025-10-28T10:30:00.000Z\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse(v).map_err(|e| E::custom(format!("invalid timestamp {v:?}: {e}")))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_is_utc_with_z_and_millis() {
        let t = Timestamp::from_millis(1_761_647_400_142);
        assert_eq!(t.to_string(), "2025-10-28T10:30:00.142Z");
        let back: Timestamp = serde_json::from_str("\"2025-10-28T10:30:00.142Z\"").unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn offsets_normalise_and_garbage_fails() {
        let t: Timestamp = serde_json::from_str("\"2025-10-28T11:30:00+01:00\"").unwrap();
        assert_eq!(t.to_string(), "2025-10-28T10:30:00.000Z");
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
        assert!(serde_json::from_str::<Timestamp>("12").is_err());
    }

    #[test]
    fn written_as_chrono_writes_it() {
        let mut seconds: i64 = 1;
        for i in 0..2000i64 {
            // Spread over the years 1970..=9999 and before 1970.
            seconds = (seconds
                .wrapping_mul(6_364_136_223)
                .wrapping_add(1_442_695_041))
            .rem_euclid(253_402_300_799);
            let s = if i % 7 == 0 {
                -seconds % 62_135_596_800
            } else {
                seconds
            };
            for nanos in [
                0,
                5_000_000,
                999_000_000,
                123_456_000,
                1_000,
                7,
                999_999_999,
            ] {
                let t = Timestamp { seconds: s, nanos };
                let d = t.to_datetime().unwrap();
                let format = if nanos % 1_000_000 == 0 {
                    SecondsFormat::Millis
                } else {
                    SecondsFormat::AutoSi
                };
                assert_eq!(t.to_string(), d.to_rfc3339_opts(format, true), "{t:?}");
            }
        }
        // Outside 0..=9999 chrono writes it (with a sign).
        let far = Timestamp {
            seconds: 300_000_000_000,
            nanos: 0,
        };
        assert!(far.to_string().starts_with('+'));
    }

    #[test]
    fn negative_millis_round_trip() {
        let t = Timestamp::from_millis(-1);
        assert_eq!(t.seconds, -1);
        assert_eq!(t.nanos, 999_000_000);
        assert_eq!(t.as_millis(), -1);
    }
}
