//! Bad input, property-tested: every parser and request validator of the
//! domain, fed arbitrary and near-valid text, never panics and either
//! refuses with `InvalidInput` or returns a value that prints back to
//! itself (`parse(value.to_string()) == value`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use lf_handoff_domain::id::{
    InteractiveHandoffId, ProjectSessionId, TaskPrId, TaskSessionId, WaveId,
};
use lf_handoff_domain::interactive_handoff::{
    check_claim_generation, check_env_key, open, InteractiveHandoffOutcome,
    InteractiveHandoffParent, InteractiveHandoffStatus, OpenInteractiveHandoff,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::session_context::{LinearIssueId, LinearProjectId};
use lf_handoff_domain::text::MAX_TEXT_BYTES;
use lf_handoff_domain::timestamp::{from_unix_micros, to_unix_micros};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use lf_handoff_domain::DomainError;
use proptest::prelude::*;
use support::*;

/// Asserts a refusal is `InvalidInput`.
fn refused_as_invalid_input(error: &DomainError) -> Result<(), TestCaseError> {
    prop_assert!(
        matches!(error, DomainError::InvalidInput(_)),
        "refused with {error:?}, not InvalidInput"
    );
    Ok(())
}

/// Text that is valid for a field checked by `check_non_blank`.
fn acceptable_text(text: &str) -> bool {
    !text.trim().is_empty() && !text.contains('\0') && text.len() <= MAX_TEXT_BYTES
}

/// Arbitrary text, or text near an id: a known prefix and a UUID that may be
/// cut, padded, upper-cased or have one character replaced.
fn id_like() -> impl Strategy<Value = String> {
    let uuid = any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).hyphenated().to_string());
    let near = (
        prop::sample::select(vec!["wv_", "ps_", "ts_", "pr_", "ih_", "WV_", "ih", ""]),
        uuid,
        0..6u8,
        any::<usize>(),
        any::<char>(),
    )
        .prop_map(|(prefix, uuid, mutation, at, c)| {
            let mut text = format!("{prefix}{uuid}");
            let at = at % text.len().max(1);
            match mutation {
                0 => {}
                1 => text = text.to_uppercase(),
                2 => text.truncate(at),
                3 => text.push(c),
                4 => {
                    if text.is_char_boundary(at) {
                        text.insert(at, c);
                    }
                }
                _ => text = text.replace('-', ""),
            }
            text
        });
    prop_oneof![any::<String>(), near]
}

macro_rules! check_id {
    ($ty:ty, $text:expr) => {{
        let text: &str = $text;
        match <$ty>::parse(text) {
            Ok(id) => {
                prop_assert!(id.as_str().starts_with(<$ty>::PREFIX));
                prop_assert_eq!(id.as_str(), text.to_ascii_lowercase());
                prop_assert_eq!(<$ty>::parse(&id.to_string()).unwrap(), id.clone());
                let json = serde_json::to_string(&id).unwrap();
                prop_assert_eq!(serde_json::from_str::<$ty>(&json).unwrap(), id);
            }
            Err(error) => {
                refused_as_invalid_input(&error)?;
                let json = serde_json::to_string(text).unwrap();
                prop_assert!(serde_json::from_str::<$ty>(&json).is_err());
            }
        }
    }};
}

/// Arbitrary text, or text shaped like a home: an optional `ssh://`, a user,
/// `@`, a host (name, `local`, bracketed IPv6 or junk) and an optional port.
fn home_like() -> impl Strategy<Value = String> {
    let near = (
        prop::sample::select(vec!["", "ssh://", "SSH://", "ssh:/"]),
        "[a-zA-Z0-9._-]{0,6}|-x|a b|j@k",
        prop::sample::select(vec!["@", "", "@@"]),
        prop_oneof![
            Just("local".to_string()),
            "[a-zA-Z0-9.-]{0,12}",
            "\\[[0-9a-fA-F:]{0,12}\\]",
            "\\[::1",
            any::<String>(),
        ],
        prop_oneof![
            Just(String::new()),
            (0u32..70_000).prop_map(|p| format!(":{p}")),
            ":0[0-9]{1,3}|:|:x|:-1",
        ],
    )
        .prop_map(|(scheme, user, at, host, port)| format!("{scheme}{user}{at}{host}{port}"));
    prop_oneof![any::<String>(), near]
}

/// A string that is sometimes blank, sometimes holds a NUL, sometimes is
/// just over the length limit, and otherwise arbitrary.
fn field_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        1 => Just(String::new()),
        1 => "[ \t\n]{1,3}",
        1 => ".{0,8}\0.{0,8}",
        1 => Just("y".repeat(MAX_TEXT_BYTES)),
        1 => Just("y".repeat(MAX_TEXT_BYTES + 1)),
        3 => "[a-zA-Z0-9 '\"$();`|&<>=-]{1,20}",
    ]
}

/// Absolute, relative, empty and non-UTF-8 paths.
fn path() -> impl Strategy<Value = PathBuf> {
    prop_oneof![
        "/[a-z/. ]{0,20}".prop_map(PathBuf::from),
        "[a-z./]{0,20}".prop_map(PathBuf::from),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(|mut bytes| {
            bytes.insert(0, b'/');
            PathBuf::from(OsString::from_vec(bytes))
        }),
    ]
}

fn request() -> impl Strategy<Value = OpenInteractiveHandoff> {
    (
        (
            home_like(),
            path(),
            field_text(),
            prop::option::of(field_text()),
        ),
        (any::<u32>(), field_text()),
        prop::collection::btree_map(field_text(), field_text(), 0..4),
        prop::collection::vec(field_text(), 0..4),
    )
        .prop_map(
            |((home, cwd, provider, session), (generation, reason), environment, argv)| {
                OpenInteractiveHandoff {
                    parent: InteractiveHandoffParent::Wave(wave_id(1)),
                    home: WaveHome::parse(&home)
                        .unwrap_or_else(|_| WaveHome::parse("jack@local").unwrap()),
                    cwd,
                    provider,
                    provider_session_id: session,
                    body_generation: generation % 4,
                    reason,
                    environment,
                    attach_argv: argv,
                    options: Default::default(),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn ids_parse_canonically_or_refuse(text in id_like()) {
        check_id!(WaveId, &text);
        check_id!(ProjectSessionId, &text);
        check_id!(TaskSessionId, &text);
        check_id!(TaskPrId, &text);
        check_id!(InteractiveHandoffId, &text);
    }

    #[test]
    fn parent_references_round_trip_or_refuse(
        kind in prop::sample::select(vec!["wave", "project", "task", "Wave", "", "ship"]),
        separator in prop::sample::select(vec![":", "", "::", ": "]),
        id in id_like(),
        raw in any::<String>(),
    ) {
        for text in [format!("{kind}{separator}{id}"), raw] {
            match InteractiveHandoffParent::parse(&text) {
                Ok(parent) => {
                    prop_assert_eq!(parent.to_string(), text.to_ascii_lowercase());
                    prop_assert_eq!(InteractiveHandoffParent::parse(&parent.to_string()).unwrap(), parent.clone());
                    let json = serde_json::to_string(&parent).unwrap();
                    prop_assert_eq!(serde_json::from_str::<InteractiveHandoffParent>(&json).unwrap(), parent);
                }
                Err(error) => refused_as_invalid_input(&error)?,
            }
        }
    }

    #[test]
    fn homes_round_trip_or_refuse(text in home_like()) {
        match WaveHome::parse(&text) {
            Ok(home) => {
                let shown = home.to_string();
                prop_assert_eq!(WaveHome::parse(&shown).unwrap(), home.clone());
                prop_assert_eq!(WaveHome::parse(&shown).unwrap().to_string(), shown.clone());
                prop_assert!(!home.user().starts_with('-') && !home.host().starts_with('-'));
                let json = serde_json::to_string(&home).unwrap();
                prop_assert_eq!(serde_json::from_str::<WaveHome>(&json).unwrap(), home);
            }
            Err(error) => {
                refused_as_invalid_input(&error)?;
                let json = serde_json::to_string(&text).unwrap();
                prop_assert!(serde_json::from_str::<WaveHome>(&json).is_err());
            }
        }
    }

    #[test]
    fn statuses_parse_only_their_own_names(text in prop_oneof![
        any::<String>(),
        prop::sample::select(vec!["waiting", "attached", "completed", "handed_back", "failed", "Failed", "handed back"]).prop_map(String::from),
    ]) {
        if let Some(status) = InteractiveHandoffStatus::parse(&text) {
            prop_assert_eq!(status.as_str(), text.as_str());
            prop_assert_eq!(status.to_string(), text);
        }
    }

    #[test]
    fn environment_keys_are_refused_exactly_when_unusable(key in field_text()) {
        let usable = acceptable_text(&key) && !key.contains('=');
        match check_env_key(&key) {
            Ok(()) => prop_assert!(usable, "{key:?} was accepted"),
            Err(error) => {
                prop_assert!(!usable, "{key:?} was refused: {error}");
                refused_as_invalid_input(&error)?;
            }
        }
    }

    #[test]
    fn outcomes_are_refused_exactly_when_their_text_is_unusable(
        kind in 0..3u8,
        text in field_text(),
    ) {
        let outcome = match kind {
            0 => InteractiveHandoffOutcome::Completed { summary: text.clone() },
            1 => InteractiveHandoffOutcome::HandedBack { summary: text.clone() },
            _ => InteractiveHandoffOutcome::Failed { reason: text.clone() },
        };
        match outcome.validate() {
            Ok(()) => prop_assert!(acceptable_text(&text)),
            Err(error) => {
                prop_assert!(!acceptable_text(&text));
                refused_as_invalid_input(&error)?;
            }
        }
        let json = serde_json::to_string(&outcome).unwrap();
        prop_assert_eq!(serde_json::from_str::<InteractiveHandoffOutcome>(&json).unwrap(), outcome);
    }

    #[test]
    fn claim_generations_are_refused_only_at_zero(generation in any::<u32>()) {
        match check_claim_generation(generation) {
            Ok(()) => prop_assert!(generation > 0),
            Err(error) => {
                prop_assert_eq!(generation, 0);
                refused_as_invalid_input(&error)?;
            }
        }
    }

    #[test]
    fn planning_tool_ids_refuse_blank_and_nul(text in field_text()) {
        for result in [
            LinearIssueId::new(text.clone()).map(|id| id.as_str().to_string()),
            LinearProjectId::new(text.clone()).map(|id| id.as_str().to_string()),
        ] {
            match result {
                Ok(kept) => {
                    prop_assert!(acceptable_text(&text));
                    prop_assert_eq!(kept, text.clone());
                }
                Err(error) => {
                    prop_assert!(!acceptable_text(&text));
                    refused_as_invalid_input(&error)?;
                }
            }
        }
    }

    /// The open request validator (C1, I5): it accepts exactly the requests
    /// whose record passes `validate()`, and refuses the rest as input.
    #[test]
    fn open_requests_are_valid_records_or_invalid_input(request in request()) {
        let validated = request.validate();
        let opened = open(&request, wave_id(1), handoff_id(1), T0);
        match (&validated, &opened) {
            (Ok(()), Ok(record)) => {
                prop_assert!(record.validate().is_ok(), "{:?}", record.validate());
                prop_assert_eq!(&record.reason, &request.reason);
                prop_assert_eq!(&record.environment, &request.environment);
                prop_assert_eq!(&record.attach_argv, &request.attach_argv);
                prop_assert_eq!(&record.cwd, &request.cwd);
                let json = serde_json::to_string(record).unwrap();
                prop_assert_eq!(&serde_json::from_str::<lf_handoff_domain::interactive_handoff::InteractiveHandoff>(&json).unwrap(), record);
            }
            (Err(error), Err(again)) => {
                refused_as_invalid_input(error)?;
                prop_assert_eq!(error, again);
                prop_assert!(!request_is_acceptable(&request), "refused {request:?}: {error}");
            }
            _ => prop_assert!(false, "validate {validated:?} and open {opened:?} disagree"),
        }
        if validated.is_ok() {
            prop_assert!(request_is_acceptable(&request), "accepted {request:?}");
        }
    }

    #[test]
    fn new_waves_are_checked_before_storage(name in field_text(), repo in field_text()) {
        let parent = Parent::Wave(Wave::new(wave_id(7), name.clone(), repo.clone()));
        match parent.validate_new() {
            Ok(()) => prop_assert!(acceptable_text(&name) && acceptable_text(&repo)),
            Err(error) => {
                prop_assert!(!(acceptable_text(&name) && acceptable_text(&repo)));
                refused_as_invalid_input(&error)?;
            }
        }
    }

    #[test]
    fn stored_timestamps_of_any_value_decode_or_are_refused(micros in any::<i64>()) {
        if let Some(instant) = from_unix_micros(micros) {
            prop_assert_eq!(to_unix_micros(instant), micros);
        }
    }
}

/// The rules of I5 written out independently of the validator.
fn request_is_acceptable(request: &OpenInteractiveHandoff) -> bool {
    let cwd_ok = request.cwd.is_absolute() && request.cwd.to_str().is_some_and(acceptable_text);
    let session_ok = request
        .provider_session_id
        .as_deref()
        .is_none_or(acceptable_text);
    let small = |text: &str| !text.contains('\0') && text.len() <= MAX_TEXT_BYTES;
    acceptable_text(&request.provider)
        && session_ok
        && request.body_generation >= 1
        && acceptable_text(&request.reason)
        && cwd_ok
        && !request.attach_argv.is_empty()
        && request
            .attach_argv
            .iter()
            .all(|a| !a.is_empty() && small(a))
        && request
            .environment
            .iter()
            .all(|(k, v)| acceptable_text(k) && !k.contains('=') && small(v))
}
