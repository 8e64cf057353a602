//! Timestamp precision: every stored instant is UTC, in whole microseconds.
//!
//! Microseconds are the finest precision every backend keeps (PostgreSQL's
//! `timestamptz`, and the integer columns the embedded backends use), so a
//! value a call returns equals what a later read returns.

use time::{OffsetDateTime, UtcOffset};

/// Converts `instant` to UTC and drops everything finer than a microsecond.
pub fn truncate_to_micros(instant: OffsetDateTime) -> OffsetDateTime {
    let utc = instant.to_offset(UtcOffset::UTC);
    let nanos = utc.nanosecond();
    // `nanos - nanos % 1000` is always a valid nanosecond value.
    utc.replace_nanosecond(nanos - nanos % 1_000).unwrap_or(utc)
}

/// Returns true if and only if `instant` is UTC and whole microseconds.
pub fn is_normalized(instant: OffsetDateTime) -> bool {
    instant.offset() == UtcOffset::UTC && instant.nanosecond() % 1_000 == 0
}

/// Microseconds since the Unix epoch, the integer form storage uses.
pub fn to_unix_micros(instant: OffsetDateTime) -> i64 {
    // Years 1..=9999 fit comfortably in i64 microseconds.
    (instant.unix_timestamp_nanos() / 1_000) as i64
}

/// The whole microseconds since the Unix epoch that a stored instant is
/// below exactly when it is before `instant`: `stored < instant` holds if
/// and only if `to_unix_micros(stored) < micros_before(instant)`, for
/// every stored (whole-microsecond) instant. It is `instant` rounded up to
/// a whole microsecond, so a bound finer than storage keeps its meaning.
pub fn micros_before(instant: OffsetDateTime) -> i64 {
    let nanos = instant.unix_timestamp_nanos();
    let micros = nanos.div_euclid(1_000) + i128::from(nanos.rem_euclid(1_000) != 0);
    // Years 1..=9999 fit comfortably in i64 microseconds.
    micros as i64
}

/// The whole microseconds since the Unix epoch that a stored instant is
/// at or below exactly when it is at or before `instant`: `stored <=
/// instant` holds if and only if `to_unix_micros(stored) <=
/// micros_at_or_before(instant)`, for every stored (whole-microsecond)
/// instant. It is `instant` rounded down to a whole microsecond, before
/// 1970 too, and any offset is fine (nothing is converted to UTC).
pub fn micros_at_or_before(instant: OffsetDateTime) -> i64 {
    // Years 1..=9999 of any offset fit comfortably in i64 microseconds.
    instant.unix_timestamp_nanos().div_euclid(1_000) as i64
}

/// The inverse of [`to_unix_micros`]; `None` when out of `time`'s range.
pub fn from_unix_micros(micros: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).ok()
}

/// A duration for people, in its two largest units: `2d 3h`, `1h 12m`,
/// `4m 10s`, `9s`. A negative one reads as `0s`.
pub fn approximate(duration: time::Duration) -> String {
    let seconds = duration.whole_seconds().max(0);
    let (days, hours, minutes, secs) = (
        seconds / 86_400,
        seconds / 3_600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (days, hours, minutes) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, _) => format!("{minutes}m {secs}s"),
        (0, _, _) => format!("{hours}h {minutes}m"),
        _ => format!("{days}d {hours}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;
    use time::Duration;

    #[test]
    fn approximations_keep_two_units() {
        assert_eq!(approximate(Duration::seconds(9)), "9s");
        assert_eq!(approximate(Duration::seconds(250)), "4m 10s");
        assert_eq!(approximate(Duration::minutes(72)), "1h 12m");
        assert_eq!(approximate(Duration::hours(51)), "2d 3h");
        assert_eq!(approximate(Duration::seconds(-5)), "0s");
    }

    #[test]
    fn truncation_drops_nanoseconds_and_converts_to_utc() {
        let t = datetime!(2026-12-02 10:00:00.123_456_789 +02:00);
        let u = truncate_to_micros(t);
        assert_eq!(u, datetime!(2026-12-02 08:00:00.123_456 UTC));
        assert!(is_normalized(u));
        assert!(!is_normalized(t));
    }

    #[test]
    fn a_bound_finer_than_storage_rounds_up() {
        let stored = datetime!(2026-12-02 08:00:00.000_010 UTC);
        for (bound, below) in [
            (datetime!(2026-12-02 08:00:00.000_010 UTC), false),
            (datetime!(2026-12-02 08:00:00.000_010_001 UTC), true),
            (datetime!(2026-12-02 08:00:00.000_009_999 UTC), false),
            (datetime!(2026-12-02 10:00:00.000_011 +02:00), true),
            (datetime!(1969-12-31 23:59:59.999_999_5 UTC), false),
        ] {
            assert_eq!(stored < bound, below, "{bound}");
            assert_eq!(
                to_unix_micros(stored) < micros_before(bound),
                below,
                "{bound}"
            );
        }
        let before_1970 = datetime!(1969-12-31 23:59:59.999_998 UTC);
        assert!(
            to_unix_micros(before_1970)
                < micros_before(datetime!(1969-12-31 23:59:59.999_998_5 UTC))
        );
        assert_eq!(
            micros_before(datetime!(1969-12-31 23:59:59.999_999_5 UTC)),
            0
        );
    }

    #[test]
    fn a_bound_at_or_after_rounds_down() {
        let stored = datetime!(2026-12-02 08:00:00.000_010 UTC);
        let before_1970 = datetime!(1969-12-31 23:59:59.999_998 UTC);
        for (stored, bound, at_or_before) in [
            (stored, datetime!(2026-12-02 08:00:00.000_010 UTC), true),
            (stored, datetime!(2026-12-02 08:00:00.000_010_999 UTC), true),
            (
                stored,
                datetime!(2026-12-02 08:00:00.000_009_999 UTC),
                false,
            ),
            (stored, datetime!(2026-12-02 10:00:00.000_010 +02:00), true),
            (
                before_1970,
                datetime!(1969-12-31 23:59:59.999_998_5 UTC),
                true,
            ),
            (
                before_1970,
                datetime!(1969-12-31 23:59:59.999_997_5 UTC),
                false,
            ),
            // Year 10000 in UTC: still a number, nothing converted.
            (stored, datetime!(9999-12-31 23:59:59 -01:00), true),
        ] {
            assert_eq!(stored <= bound, at_or_before, "{bound}");
            assert_eq!(
                to_unix_micros(stored) <= micros_at_or_before(bound),
                at_or_before,
                "{bound}"
            );
        }
    }

    #[test]
    fn unix_micros_round_trip() {
        let t = datetime!(2026-12-02 08:00:00.123_456 UTC);
        assert_eq!(from_unix_micros(to_unix_micros(t)), Some(t));
    }
}
