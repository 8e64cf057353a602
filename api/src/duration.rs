//! Durations people type for deadlines and cut-offs: `90s`, `15m`, `2h`,
//! `1d`, `2w`, `1h30m`.
//!
//! The grammar is one or more `<integer><unit>` parts with no spaces
//! between them, units `w` (weeks), `d` (days), `h` (hours), `m` (minutes)
//! and `s` (seconds), each at most once and from the largest down
//! (`1h30m`, not `30m1h`), so a value reads one way only. Spaces around
//! the whole value are ignored. It is refused when it is empty, has a part
//! without a number or without a unit, a unit out of order or given twice,
//! an unknown unit (`ms`, `y`, `H`), adds up to zero, or is longer than
//! [`MAX`] (100 years, which also keeps every deadline computed from it
//! far inside what a timestamp can hold).
//!
//! `open --expires-in`, `extend --by`, `list --older-than`, `list
//! --due-within` (and the service's `older_than` and `due_within`) and
//! `prune --finished-before` read it as a person's [`PERSON`] form. Settings
//! (a store URL's timeouts and retry window, `wait --timeout`, the
//! service's own timeouts) read the same grammar in its [`SETTING`] form,
//! which also takes milliseconds (`500ms`, after `s`), a bare number of
//! seconds, and zero, up to what a `u64` count of milliseconds holds.

use std::fmt;
use std::time::Duration;

use time::OffsetDateTime;

/// The longest duration accepted: 100 years of 365 days.
pub const MAX: Duration = Duration::from_secs(100 * 365 * 86_400);

/// The longest text accepted, in bytes: more than any sensible duration
/// needs, so a pasted blob is refused before it is looked at.
pub const MAX_TEXT: usize = 64;

/// The units, from the largest down, with their length in milliseconds.
const UNITS: [(&str, u64); 6] = [
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// What one use of the grammar accepts besides `<number><unit>` parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// The `ms` unit.
    pub milliseconds: bool,
    /// A bare number, read as seconds (`45`).
    pub bare_seconds: bool,
    /// A duration of zero (`0s`).
    pub zero: bool,
    /// The longest duration accepted.
    pub max: Duration,
    /// Examples of good values, for the messages.
    pub examples: &'static str,
    /// The units a message lists.
    pub units: &'static str,
}

/// What a person types for a deadline or a cut-off: whole seconds and
/// longer, more than zero, at most [`MAX`].
pub const PERSON: Form = Form {
    milliseconds: false,
    bare_seconds: false,
    zero: false,
    max: MAX,
    examples: "90s, 15m, 2h, 1d, 2w or 1h30m",
    units: "s (seconds), m (minutes), h (hours), d (days) or w (weeks)",
};

/// What a setting takes (a timeout, a retry window): milliseconds too, a
/// bare number of seconds, and zero, up to `u64::MAX` milliseconds.
pub const SETTING: Form = Form {
    milliseconds: true,
    bare_seconds: true,
    zero: true,
    max: Duration::from_millis(u64::MAX),
    examples: "500ms, 30s, 2m, 1h or 1m30s",
    units: "ms (milliseconds), s, m, h, d or w",
};

/// Why a duration was refused. Its `Display` says what was wrong and what
/// a good value looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing but spaces.
    Empty,
    /// Longer than [`MAX_TEXT`] bytes.
    TooLongText,
    /// A part has no number where one was expected (`h`, `1h-5m`, `-2h`).
    MissingNumber(String),
    /// A number without a unit (`90`, `1h30`).
    MissingUnit(String),
    /// A unit that is not `w`, `d`, `h`, `m` or `s`.
    UnknownUnit(String),
    /// A number with a fraction (`1.5h`, `0,5d`): the grammar takes whole
    /// numbers, so an hour and a half is `1h30m`.
    Fraction(String),
    /// A unit given twice or after a smaller one (`1h1h`, `30m1h`).
    OutOfOrder(String),
    /// The parts add up to zero.
    Zero,
    /// Longer than [`MAX`], or too large to count at all.
    TooLong(String),
}

impl DurationError {
    /// What was wrong and what a good value of `form` looks like.
    pub fn message(&self, form: &Form) -> String {
        let good = format!("write a duration such as {}", form.examples);
        match self {
            Self::Empty => format!("the duration is empty; {good}"),
            Self::TooLongText => {
                format!("the duration is longer than {MAX_TEXT} characters; {good}")
            }
            Self::MissingNumber(text) => format!(
                "{text:?} is not a duration: a number must come before each unit; {good}"
            ),
            Self::MissingUnit(text) => format!(
                "{text:?} is not a duration: every number needs a unit ({}); {good}",
                form.units
            ),
            Self::UnknownUnit(unit) => format!(
                "unknown duration unit {unit:?}: use {}; {good}",
                form.units
            ),
            Self::Fraction(text) => match whole_form(text) {
                Some(whole) => format!(
                    "{text:?} is not a duration: numbers are whole, so write {whole}; {good}"
                ),
                None => format!("{text:?} is not a duration: numbers are whole; {good}"),
            },
            Self::OutOfOrder(text) => format!(
                "{text:?} is not a duration: give each unit once, largest first, as in 1d12h or 1h30m"
            ),
            Self::Zero => "the duration is zero; give a positive one, such as 15m".to_string(),
            Self::TooLong(text) if form.max == MAX => format!(
                "{text:?} is too long a duration: the limit is 100 years ({}d)",
                MAX.as_secs() / 86_400
            ),
            Self::TooLong(text) => format!("duration {text:?} is too long"),
        }
    }
}

impl fmt::Display for DurationError {
    /// The message of the [`PERSON`] form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(&PERSON))
    }
}

impl std::error::Error for DurationError {}

/// The whole-number form of a one-part duration with a fraction (`1.5h`
/// is `1h30m`, `0,25d` is `6h`), if it is one and comes to a whole,
/// positive number of seconds within [`MAX`].
fn whole_form(text: &str) -> Option<String> {
    let unit = text.chars().last()?;
    let millis = UNITS
        .iter()
        .find(|(name, _)| name.len() == 1 && name.starts_with(unit))?
        .1;
    let length = millis / 1_000;
    let number = text[..text.len() - unit.len_utf8()].replace(',', ".");
    let (whole, fraction) = number.split_once('.')?;
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if !(all_digits(whole) && all_digits(fraction)) || fraction.is_empty() || fraction.len() > 9 {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let scale = 10_u64.pow(u32::try_from(fraction.len()).ok()?);
    let fraction: u64 = fraction.parse().ok()?;
    let parts = whole.checked_mul(length)?;
    let share = fraction.checked_mul(length)?;
    if share % scale != 0 {
        return None;
    }
    let seconds = parts.checked_add(share / scale)?;
    let duration = Duration::from_secs(seconds);
    (seconds > 0 && duration <= MAX).then(|| format(duration))
}

/// Parses a duration a person typed ([`PERSON`]; see the [module](self)
/// for the grammar).
///
/// # Errors
/// A [`DurationError`] saying what is wrong.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    parse_as(text, &PERSON)
}

/// Parses a duration in `form` (see the [module](self) for the grammar).
///
/// # Errors
/// A [`DurationError`] saying what is wrong; its
/// [`message`](DurationError::message) in `form` says it to a person.
pub fn parse_as(text: &str, form: &Form) -> Result<Duration, DurationError> {
    if text.len() > MAX_TEXT {
        return Err(DurationError::TooLongText);
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    let too_long = || DurationError::TooLong(trimmed.to_string());
    if form.bare_seconds && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: u64 = trimmed.parse().map_err(|_| too_long())?;
        let millis = seconds.checked_mul(1_000).ok_or_else(too_long)?;
        return checked(Duration::from_millis(millis), trimmed, form);
    }
    let mut total: u64 = 0;
    // Index into UNITS of the smallest unit seen so far; the next part
    // must use a smaller one.
    let mut next_unit = 0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(DurationError::MissingNumber(trimmed.to_string()));
        }
        // Digits only: the parse fails only on overflow.
        let number: u64 = rest[..digits].parse().map_err(|_| too_long())?;
        rest = &rest[digits..];
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || c.is_whitespace())
            .map_or(rest.len(), |(at, _)| at);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(trimmed.to_string()));
        }
        let Some(index) = UNITS
            .iter()
            .position(|(name, _)| *name == unit && (form.milliseconds || *name != "ms"))
        else {
            if unit.starts_with(['.', ',']) {
                return Err(DurationError::Fraction(trimmed.to_string()));
            }
            return Err(DurationError::UnknownUnit(unit.to_string()));
        };
        if index < next_unit {
            return Err(DurationError::OutOfOrder(trimmed.to_string()));
        }
        next_unit = index + 1;
        let millis = number.checked_mul(UNITS[index].1).ok_or_else(too_long)?;
        total = total.checked_add(millis).ok_or_else(too_long)?;
    }
    checked(Duration::from_millis(total), trimmed, form)
}

/// `total` if `form` takes it: zero only where it takes zero, at most its
/// longest.
fn checked(total: Duration, text: &str, form: &Form) -> Result<Duration, DurationError> {
    if total.is_zero() && !form.zero {
        return Err(DurationError::Zero);
    }
    if total > form.max {
        return Err(DurationError::TooLong(text.to_string()));
    }
    Ok(total)
}

/// `duration` in the form [`parse`] reads, largest unit first, whole
/// seconds (`1h30m`, `2w3d`, `45s`; `0s` for less than a second).
pub fn format(duration: Duration) -> String {
    let mut seconds = duration.as_secs();
    if seconds == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (name, millis) in UNITS {
        let length = millis / 1_000;
        if length == 0 {
            break;
        }
        let count = seconds / length;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push_str(name);
            seconds %= length;
        }
    }
    out
}

/// `now` plus `duration`, or `None` past what a timestamp holds (never
/// for a duration [`parse`] returned and a present-day `now`).
pub fn after(now: OffsetDateTime, duration: Duration) -> Option<OffsetDateTime> {
    now.checked_add(time::Duration::try_from(duration).ok()?)
}

/// `now` minus `duration`, or `None` before what a timestamp holds: the
/// cut-off of "finished (or created) more than `duration` ago".
pub fn before(now: OffsetDateTime, duration: Duration) -> Option<OffsetDateTime> {
    now.checked_sub(time::Duration::try_from(duration).ok()?)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use time::macros::datetime;

    use super::*;

    const MINUTE: u64 = 60;
    const HOUR: u64 = 3_600;
    const DAY: u64 = 86_400;

    #[test]
    fn a_fraction_is_refused_with_its_whole_form() {
        for (text, whole) in [("1.5h", "1h30m"), ("0,25d", "6h"), ("2.5w", "2w3d12h")] {
            let message = parse(text).unwrap_err().to_string();
            assert!(message.contains(&format!("write {whole};")), "{message}");
            assert!(message.contains("1h30m"), "{message}");
        }
        // No whole form: a third of a second, or two fractions.
        for text in ["0.3333s", "1.5h30.5m"] {
            let message = parse(text).unwrap_err().to_string();
            assert!(message.contains("numbers are whole;"), "{message}");
        }
        let message = parse("500ms").unwrap_err().to_string();
        assert!(message.contains("1h30m"), "{message}");
    }

    #[test]
    fn each_unit_and_combinations_parse() {
        for (text, seconds) in [
            ("90s", 90),
            ("15m", 15 * MINUTE),
            ("2h", 2 * HOUR),
            ("1d", DAY),
            ("2w", 14 * DAY),
            ("1h30m", HOUR + 30 * MINUTE),
            ("1w2d3h4m5s", 7 * DAY + 2 * DAY + 3 * HOUR + 4 * MINUTE + 5),
            ("1h0m", HOUR),
            ("007m", 7 * MINUTE),
            ("  2h\n", 2 * HOUR),
            ("36500d", 36_500 * DAY),
        ] {
            assert_eq!(parse(text), Ok(Duration::from_secs(seconds)), "{text:?}");
        }
    }

    #[test]
    fn bad_durations_are_refused_with_the_reason() {
        use DurationError as E;
        for (text, expected) in [
            ("", E::Empty),
            ("   ", E::Empty),
            ("0s", E::Zero),
            ("0h0m", E::Zero),
            ("90", E::MissingUnit("90".into())),
            ("1h30", E::MissingUnit("1h30".into())),
            ("h", E::MissingNumber("h".into())),
            ("-1h", E::MissingNumber("-1h".into())),
            ("1h 30m", E::MissingNumber("1h 30m".into())),
            ("1.5h", E::Fraction("1.5h".into())),
            ("0,25d", E::Fraction("0,25d".into())),
            ("500ms", E::UnknownUnit("ms".into())),
            ("2H", E::UnknownUnit("H".into())),
            ("1y", E::UnknownUnit("y".into())),
            ("2hours", E::UnknownUnit("hours".into())),
            ("1h½", E::UnknownUnit("h½".into())),
            ("30m1h", E::OutOfOrder("30m1h".into())),
            ("1h1h", E::OutOfOrder("1h1h".into())),
            ("36501d", E::TooLong("36501d".into())),
            ("5300w", E::TooLong("5300w".into())),
            (
                "18446744073709551616s",
                E::TooLong("18446744073709551616s".into()),
            ),
            (
                "18446744073709551615w",
                E::TooLong("18446744073709551615w".into()),
            ),
        ] {
            assert_eq!(parse(text), Err(expected), "{text:?}");
        }
        assert_eq!(parse(&"1".repeat(65)), Err(E::TooLongText));
    }

    #[test]
    fn messages_say_what_a_good_duration_looks_like() {
        for text in ["", "90", "h", "500ms", "30m1h", "0s"] {
            let message = parse(text).unwrap_err().to_string();
            assert!(
                message.contains("15m") || message.contains("1h30m") || message.contains("(s"),
                "{text:?}: {message}"
            );
        }
        let message = parse("500ms").unwrap_err().to_string();
        assert!(message.contains("\"ms\""), "{message}");
    }

    #[test]
    fn formatting_uses_the_largest_units_first() {
        assert_eq!(format(Duration::from_secs(5_400)), "1h30m");
        assert_eq!(format(Duration::from_secs(9 * DAY + 5)), "1w2d5s");
        assert_eq!(format(Duration::from_millis(999)), "0s");
    }

    #[test]
    fn deadlines_and_cut_offs_are_computed_from_now() {
        let now = datetime!(2026-12-03 11:00:00 UTC);
        let hour = parse("1h30m").unwrap();
        assert_eq!(after(now, hour), Some(datetime!(2026-12-03 12:30:00 UTC)));
        assert_eq!(before(now, hour), Some(datetime!(2026-12-03 09:30:00 UTC)));
        assert!(after(now, MAX).is_some());
        assert!(before(now, MAX).is_some());
    }

    #[test]
    fn a_setting_takes_milliseconds_bare_seconds_and_zero() {
        for (text, millis) in [
            ("500ms", 500),
            ("1m30s", 90_000),
            ("1s250ms", 1_250),
            ("45", 45_000),
            ("0", 0),
            ("0s", 0),
            (" 2h ", 7_200_000),
            ("1w", 604_800_000),
        ] {
            assert_eq!(
                parse_as(text, &SETTING),
                Ok(Duration::from_millis(millis)),
                "{text:?}"
            );
        }
        let refused = parse_as("5soon", &SETTING).unwrap_err();
        assert_eq!(
            refused.message(&SETTING),
            "unknown duration unit \"soon\": use ms (milliseconds), s, m, h, d or w; \
             write a duration such as 500ms, 30s, 2m, 1h or 1m30s"
        );
        assert_eq!(
            parse_as("18446744073709552s", &SETTING),
            Err(DurationError::TooLong("18446744073709552s".into()))
        );
        assert_eq!(
            parse_as("18446744073709551615ms", &SETTING),
            Ok(Duration::from_millis(u64::MAX))
        );
        assert_eq!(
            parse_as("30s1m", &SETTING),
            Err(DurationError::OutOfOrder("30s1m".into()))
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Every accepted value is positive, at most MAX, and its
        /// canonical form reads back to it.
        #[test]
        fn anything_parses_within_bounds_or_is_refused(text in any::<String>()) {
            if let Ok(duration) = parse(&text) {
                prop_assert!(!duration.is_zero() && duration <= MAX);
                prop_assert_eq!(parse(&format(duration)), Ok(duration));
            }
        }

        /// Text shaped like a duration, with odd numbers and units.
        #[test]
        fn duration_like_text_parses_to_the_sum_of_its_parts(
            parts in prop::collection::vec(
                (0u64..100_000, prop::sample::select(vec!["w", "d", "h", "m", "s", "ms", "y"])),
                1..6,
            )
        ) {
            let text: String = parts.iter().map(|(n, unit)| format!("{n}{unit}")).collect();
            let seconds = |unit: &str| UNITS.iter().find(|(name, _)| *name == unit && unit != "ms").map(|(_, millis)| millis / 1_000);
            let known = parts.iter().all(|(_, unit)| seconds(unit).is_some());
            let ordered = parts.windows(2).all(|pair| seconds(pair[0].1) > seconds(pair[1].1));
            let total: u64 = parts.iter().map(|(n, unit)| n * seconds(unit).unwrap_or(0)).sum();
            match parse(&text) {
                Ok(duration) => {
                    prop_assert!(known && ordered, "{text}");
                    prop_assert_eq!(duration.as_secs(), total);
                }
                Err(_) => prop_assert!(
                    text.len() > MAX_TEXT || !known || !ordered || total == 0 || total > MAX.as_secs(),
                    "{text} refused"
                ),
            }
        }

        /// Every whole-second duration up to MAX round-trips through its
        /// canonical form.
        #[test]
        fn canonical_forms_round_trip(seconds in 1..=MAX.as_secs()) {
            let duration = Duration::from_secs(seconds);
            prop_assert_eq!(parse(&format(duration)), Ok(duration));
        }
    }
}
