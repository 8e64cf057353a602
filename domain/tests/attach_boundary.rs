//! The attach boundary's environment rule (C29), with no IO: every name
//! and prefix on the list is refused by an open request, named, on the
//! paths that create and the paths that replay; names that only look alike
//! pass; a stored record holding a refused name still reads (I5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use lf_handoff_domain::interactive_handoff::{
    check_attach_environment, decide_open_with, open, refused_env_reason, OpenDecision,
    OpenInteractiveHandoff, OpenOptions, StepKey, REFUSED_ENV_NAMES, REFUSED_ENV_PREFIXES,
};
use lf_handoff_domain::DomainError;
use support::*;

/// The names the contract lists (C29) and the obvious siblings: each must
/// be refused.
const MUST_REFUSE: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "LD_",
    "DYLD_INSERT_LIBRARIES",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RUBYLIB",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_CONFIG_COUNT",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "ZDOTDIR",
    "GCONV_PATH",
    "BASH_FUNC_ls%%",
    "PATH",
    "HOME",
    "JAVA_TOOL_OPTIONS",
    "LESSOPEN",
];

/// Names that look like refused ones but are not read by any loader or
/// shell: each must pass.
const MUST_PASS: &[&str] = &[
    "LF_HOME",
    "DEMO_TOKEN",
    "LANG",
    "TERM",
    "ld_preload",
    "path",
    "MY_LD_PRELOAD",
    "PATHS",
    "XLD_PRELOAD",
    "GIT_AUTHOR_NAME",
    "PYTHONUNBUFFERED",
    "ENVIRONMENT",
];

fn invalid_naming(result: Result<impl std::fmt::Debug, DomainError>, name: &str) {
    match result {
        Err(DomainError::InvalidInput(message)) => assert!(
            message.contains(&format!("{name:?}")) && message.contains("C29"),
            "{message:?} does not name {name:?}"
        ),
        other => panic!("{name}: expected invalid input, got {other:?}"),
    }
}

fn with_env(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("LF_HOME".to_string(), "/tmp/lf".to_string()),
        (name.to_string(), "/tmp/x".to_string()),
    ])
}

#[test]
fn c29_every_listed_name_and_prefix_is_refused_and_look_alikes_pass() {
    for name in MUST_REFUSE {
        assert!(refused_env_reason(name).is_some(), "{name} is not refused");
        invalid_naming(check_attach_environment(&with_env(name)), name);
    }
    for (name, why) in REFUSED_ENV_NAMES {
        assert!(!why.is_empty(), "{name} says why");
        invalid_naming(check_attach_environment(&with_env(name)), name);
    }
    for (prefix, why) in REFUSED_ENV_PREFIXES {
        assert!(!why.is_empty(), "{prefix} says why");
        let name = format!("{prefix}ANYTHING");
        invalid_naming(check_attach_environment(&with_env(&name)), &name);
    }
    for name in MUST_PASS {
        assert_eq!(refused_env_reason(name), None, "{name} is refused");
        check_attach_environment(&with_env(name)).unwrap();
    }
}

#[test]
fn c29_several_refused_names_are_all_named_in_one_refusal() {
    let mut environment = with_env("BASH_ENV");
    environment.insert("LD_PRELOAD".into(), "/tmp/x.so".into());
    let Err(DomainError::InvalidInput(message)) = check_attach_environment(&environment) else {
        panic!("refused names passed");
    };
    assert!(message.contains("\"BASH_ENV\""), "{message}");
    assert!(message.contains("\"LD_PRELOAD\""), "{message}");
    assert!(!message.contains("LF_HOME"), "{message}");
}

#[test]
fn c29_open_refuses_a_refused_name_when_creating_and_when_replaying() {
    let parent = task_parent();
    let existing = waiting();
    let step = StepKey::parse("login@turn-1").unwrap();
    let mut at_step = existing.clone();
    at_step.step = Some(step.clone());
    let with_step = OpenOptions {
        step: Some(step),
        ..OpenOptions::default()
    };
    let replaying = |request: &OpenInteractiveHandoff| {
        decide_open_with(
            &request.clone().with_options(OpenOptions::default()),
            &parent,
            Some(&existing),
            None,
            handoff_id(9),
            at(5),
        )
    };
    for name in ["BASH_ENV", "LD_PRELOAD", "PATH"] {
        let request = OpenRequest::on(&parent).environment(with_env(name)).build();
        invalid_naming(request.validate(), name);
        invalid_naming(open(&request, wave_id(1), handoff_id(9), T0), name);
        // No handoff yet: it would be created.
        invalid_naming(
            decide_open_with(
                &request.clone().with_options(OpenOptions::default()),
                &parent,
                None,
                None,
                handoff_id(9),
                T0,
            ),
            name,
        );
        // The parent's active handoff would be replayed.
        invalid_naming(replaying(&request), name);
        // The parent's handoff for the step would be returned.
        invalid_naming(
            decide_open_with(
                &request.clone().with_options(with_step.clone()),
                &parent,
                Some(&at_step),
                Some(&at_step),
                handoff_id(9),
                at(5),
            ),
            name,
        );
    }
    // The same request without the refused name replays as before.
    let request = OpenRequest::on(&parent).build();
    assert_eq!(
        replaying(&request).unwrap(),
        OpenDecision::Replay(existing.clone())
    );
}

#[test]
fn c29_a_stored_record_holding_a_refused_name_still_validates() {
    // An earlier release stored it; the store must still read, export and
    // import it (the command line's attach refuses to run it).
    let mut record = waiting();
    record.environment = with_env("BASH_ENV");
    record.validate().unwrap();
    invalid_naming(check_attach_environment(&record.environment), "BASH_ENV");
}
