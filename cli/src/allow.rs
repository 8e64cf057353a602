//! The programs `attach` runs (contract C29, the attach boundary).
//!
//! An agent writes a handoff's command; a person's `attach` runs it. So
//! `attach` runs a command only when its program, the argv's first word, is
//! on the person's allow-list: `tmux` unless the config file's `[attach]`
//! table says otherwise (`allow_programs = ["tmux", "zellij"]`, which
//! replaces the default), plus each `--allow-program PROGRAM` of this
//! command. Otherwise it refuses, naming the program and how to allow it.
//!
//! The program is compared as written, never by its file name: an entry
//! `tmux` allows a command whose first word is exactly `tmux`, found on
//! the person's own `PATH` (an environment that sets `PATH` is refused,
//! see the domain's list), and an entry `/usr/bin/tmux` allows exactly
//! that path. So `/tmp/x/tmux` or `./tmux`, which the agent could have
//! written, is not `tmux`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{CliError, CliResult};
use crate::output::{printable, shell_words};
use crate::store_select::{config_file, read_config, Environment};
use crate::tmux::plain_attach;

/// The programs `attach` runs when the config file names none.
pub const DEFAULT_ALLOWED: &[&str] = &["tmux"];

/// The config file's shape as `attach` reads it: only the `[attach]`
/// table; other keys are left to other readers.
#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    attach: AttachConfig,
}

/// The `[attach]` table. Unknown keys are refused, so a misspelt
/// setting is reported instead of silently leaving the default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AttachConfig {
    allow_programs: Option<Vec<String>>,
}

/// The programs `attach` may run, and where the list came from (for the
/// refusal's advice).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    programs: Vec<String>,
    /// The config file that was read or would be, if one is known.
    config: Option<PathBuf>,
}

impl AllowList {
    /// The allow-list of this command: the config file's
    /// `attach.allow_programs` (else [`DEFAULT_ALLOWED`]) and `flags`.
    ///
    /// # Errors
    /// Exit 2 for an empty `--allow-program`, a `--config` file that
    /// cannot be read, or a config file whose `[attach]` table does not
    /// parse.
    pub fn load(flags: &[String], config: Option<&Path>, env: &Environment) -> CliResult<Self> {
        let file = config_file(config, env);
        let configured = match &file {
            Some((path, explicit)) => read_config::<ConfigFile>(
                path,
                *explicit,
                "set attach.allow_programs to a list of programs, such as [\"tmux\"]",
            )?
            .and_then(|file| file.attach.allow_programs),
            None => None,
        };
        Self::new(configured, flags, file.map(|(path, _)| path))
    }

    /// The allow-list of `configured` programs (`None`: the default) and
    /// `flags`, advising `config` as the file to change.
    ///
    /// # Errors
    /// Exit 2 for an empty program name, in the file or a flag.
    pub fn new(
        configured: Option<Vec<String>>,
        flags: &[String],
        config: Option<PathBuf>,
    ) -> CliResult<Self> {
        let mut programs =
            configured.unwrap_or_else(|| DEFAULT_ALLOWED.iter().map(ToString::to_string).collect());
        programs.extend(flags.iter().cloned());
        if programs.iter().any(String::is_empty) {
            return Err(CliError::usage(
                "an allowed program is empty; name a program, such as --allow-program tmux",
            ));
        }
        Ok(Self { programs, config })
    }

    /// Whether `program` (an argv's first word) may run.
    pub fn allows(&self, program: &str) -> bool {
        self.programs.iter().any(|allowed| allowed == program)
    }

    /// Checks that the command `argv` of handoff `id` may run.
    ///
    /// # Errors
    /// Exit 126 (kind `program_not_allowed`) naming the program, the
    /// command and how to allow it.
    pub fn check(&self, id: &impl std::fmt::Display, argv: &[String]) -> CliResult<()> {
        let Some(program) = argv.first() else {
            return Err(CliError::cannot_execute(format!(
                "handoff {id} has no attach command"
            )));
        };
        if self.allows(program) {
            return self.check_tmux(id, argv);
        }
        let shown = printable(program);
        let allowed = if self.programs.is_empty() {
            "none".to_string()
        } else {
            self.programs
                .iter()
                .map(|program| printable(program).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut advice = format!(
            "read the command, then allow its program: `lf-handoff attach {id} --allow-program \
             {}` for this attach",
            shell_words(std::slice::from_ref(program))
        );
        let listed = self
            .programs
            .iter()
            .chain([program])
            .map(|program| format!("{program:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let file = self.config.as_ref().map_or_else(
            || "the config file".to_string(),
            |path| format!("the config file {}", printable(&path.display().to_string())),
        );
        // Writing to a String cannot fail.
        let _ = write!(
            advice,
            ", or for good in {file}: [attach] allow_programs = [{listed}]; \
             `lf-handoff attach {id} --print` shows it without running it"
        );
        Err(CliError::not_allowed(format!(
            "attach runs only the programs on its allow-list ({allowed}); handoff {id} runs \
             {shown:?}: {}",
            shell_words(argv)
        ))
        .hint(advice))
    }
}

impl AllowList {
    /// Allowing `tmux` allows joining a session, not whatever tmux can
    /// run: a command of a program named `tmux` runs only when it is a
    /// plain attach ([`plain_attach`]), so `tmux new-session CMD`, `tmux
    /// -c CMD`, `tmux -f FILE attach` or `tmux attach \; run-shell CMD`,
    /// which an agent could write, do not run.
    fn check_tmux(&self, id: &impl std::fmt::Display, argv: &[String]) -> CliResult<()> {
        let is_tmux = argv
            .first()
            .and_then(|program| Path::new(program).file_name())
            .is_some_and(|name| name == "tmux");
        if !is_tmux || plain_attach(argv).is_some() {
            return Ok(());
        }
        Err(CliError::not_allowed(format!(
            "handoff {id}'s command does more than join a tmux session, which is all an allowed \
             tmux may do: {}",
            shell_words(argv)
        ))
        .hint(format!(
            "`lf-handoff attach {id} --print` shows it without running it; read it, and run it \
             yourself if you trust it"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_default_allows_tmux_by_that_name_only() {
        let list = AllowList::new(None, &[], None).unwrap();
        assert!(list.allows("tmux"));
        for program in ["/tmp/x/tmux", "./tmux", "sh", "TMUX", "tmux ", "bash"] {
            assert!(!list.allows(program), "{program}");
        }
    }

    #[test]
    fn the_config_replaces_the_default_and_flags_add_to_it() {
        let list = AllowList::new(
            Some(vec!["zellij".into()]),
            &["/usr/bin/ssh".to_string()],
            None,
        )
        .unwrap();
        assert!(list.allows("zellij"));
        assert!(list.allows("/usr/bin/ssh"));
        assert!(!list.allows("tmux"));
        assert!(!list.allows("ssh"));
        assert!(AllowList::new(None, &[String::new()], None).is_err());
    }

    #[test]
    fn a_refusal_names_the_command_and_the_config_file_to_change() {
        let list = AllowList::new(None, &[], Some(PathBuf::from("/home/j/config.toml"))).unwrap();
        let error = list
            .check(&"ih_1", &argv(&["sh", "-c", "echo hi"]))
            .unwrap_err();
        assert_eq!((error.code(), error.kind()), (126, "program_not_allowed"));
        let message = error.to_string();
        assert!(message.contains("sh -c 'echo hi'"), "{message}");
        assert!(message.contains("/home/j/config.toml"), "{message}");
        list.check(&"ih_1", &argv(&["tmux", "attach"])).unwrap();
    }

    #[test]
    fn an_allowed_tmux_only_joins_a_session() {
        let list = AllowList::new(None, &[], None).unwrap();
        for joins in [
            &["tmux", "attach"][..],
            &["tmux", "attach-session", "-t", "agent-7"],
            &["tmux", "-L", "lf", "a", "-t", "agent-7"],
            &["tmux", "-S", "/tmp/lf.sock", "attach", "-d", "-t", "x"],
        ] {
            list.check(&"ih_1", &argv(joins))
                .unwrap_or_else(|e| panic!("{joins:?}: {e}"));
        }
        for runs in [
            &["tmux", "new-session", "sh -c 'curl evil'"][..],
            &["tmux", "-c", "curl evil"],
            &["tmux", "-f", "/tmp/evil.conf", "attach", "-t", "x"],
            &["tmux", "attach", "-t", "x", ";", "run-shell", "curl evil"],
            &["tmux", "run-shell", "curl evil"],
            &["tmux", "attach", "-t", "x", "extra"],
        ] {
            let error = list.check(&"ih_1", &argv(runs)).unwrap_err();
            assert_eq!(
                (error.code(), error.kind()),
                (126, "program_not_allowed"),
                "{runs:?}"
            );
            assert!(error.to_string().contains("more than join"), "{error}");
        }
    }
}
