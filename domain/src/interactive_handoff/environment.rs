//! The attach boundary's environment rule (contract C29): the environment
//! names a handoff may not carry, because they change how the programs a
//! person's `attach` starts load, start or choose what else to run.
//!
//! An agent writes a handoff and a person runs its command; an environment
//! such as `BASH_ENV=/tmp/x` or `LD_PRELOAD=/tmp/x.so` would have the
//! person's own terminal run the agent's code before the command they can
//! see. `open` refuses such names on every path (the library, the command
//! line, the service) as invalid input naming each one, before anything is
//! read or written, and `attach` refuses a stored handoff that holds one
//! (written by an earlier release) with the same error. The rule is not
//! one of the record's invariants (I5): a store of an earlier release, or
//! an export of one, still reads and imports without loss.
//!
//! Names are compared exactly, as the loaders, shells and interpreters
//! that read them do (`ld_preload` is not `LD_PRELOAD`).

use std::collections::BTreeMap;

use crate::error::{DomainError, DomainResult};

/// The prefixes of refused environment names, each with why: any name that
/// starts with one is refused.
pub const REFUSED_ENV_PREFIXES: &[(&str, &str)] = &[
    (
        "LD_",
        "the dynamic loader reads it (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...)",
    ),
    ("DYLD_", "the macOS dynamic loader reads it"),
    (
        "BASH_FUNC_",
        "bash imports it as a function that replaces a command",
    ),
    (
        "GIT_CONFIG",
        "it adds git configuration, which can name commands git runs",
    ),
    ("LUA_INIT", "lua runs it at start"),
    ("LUA_PATH", "it chooses the modules lua loads"),
    ("LUA_CPATH", "it chooses the native modules lua loads"),
    (
        "NPM_CONFIG_",
        "it sets npm configuration, which can name commands npm runs",
    ),
    (
        "npm_config_",
        "it sets npm configuration, which can name commands npm runs",
    ),
    (
        "CARGO_",
        "it sets cargo configuration, which can name programs cargo runs (a rustc wrapper, \
         a target's runner)",
    ),
];

/// The refused environment names, each with why.
pub const REFUSED_ENV_NAMES: &[(&str, &str)] = &[
    // Which tmux server a tmux command talks to.
    (
        "TMUX",
        "it chooses the tmux server a tmux command talks to, whose panes run its commands",
    ),
    (
        "TMUX_TMPDIR",
        "it chooses where tmux finds its server's socket",
    ),
    // Editors' and readline's startup commands.
    ("VIMINIT", "vim runs it at start"),
    ("EXINIT", "vi and vim run it at start"),
    ("MYVIMRC", "it chooses the startup file vim reads"),
    (
        "INPUTRC",
        "it chooses the startup file readline reads, which can bind keys to commands",
    ),
    // Which repository git reads, whose configuration can name commands.
    (
        "GIT_DIR",
        "it chooses the repository git reads, whose configuration can name commands git runs",
    ),
    (
        "GIT_WORK_TREE",
        "it chooses the working tree git runs in, and its hooks and configuration",
    ),
    ("LOCPATH", "it chooses the locale files the C library loads"),
    ("RUSTC_WRAPPER", "cargo runs it in place of the compiler"),
    (
        "RUSTC_WORKSPACE_WRAPPER",
        "cargo runs it in place of the compiler",
    ),
    // Which program runs, and the startup files it reads.
    ("PATH", "it chooses which program a command name runs"),
    (
        "HOME",
        "it chooses the startup files programs read (.bashrc, .tmux.conf, ...)",
    ),
    (
        "XDG_CONFIG_HOME",
        "it chooses the configuration files programs read",
    ),
    (
        "XDG_CONFIG_DIRS",
        "it chooses the configuration files programs read",
    ),
    (
        "SHELL",
        "programs start it as the shell (tmux's new windows)",
    ),
    ("ZDOTDIR", "it chooses the startup files zsh runs"),
    ("ENV", "sh and ksh run the file it names at start"),
    ("BASH_ENV", "bash runs the file it names at start"),
    // How a shell parses and what it runs at each prompt.
    ("SHELLOPTS", "it sets bash options at start"),
    ("BASHOPTS", "it sets bash options at start"),
    ("IFS", "it changes how a shell splits words"),
    ("PROMPT_COMMAND", "bash runs it before each prompt"),
    (
        "PS0",
        "bash expands it, running what it names, after each command line",
    ),
    (
        "PS1",
        "a shell expands it, running what it names, at each prompt",
    ),
    (
        "PS2",
        "a shell expands it, running what it names, at each continuation prompt",
    ),
    (
        "PS4",
        "a shell expands it, running what it names, for each traced command",
    ),
    // The C library and the libraries programs load.
    (
        "GCONV_PATH",
        "glibc loads character conversion modules from it",
    ),
    ("GLIBC_TUNABLES", "it changes how glibc starts a program"),
    (
        "OPENSSL_CONF",
        "OpenSSL reads it, and it can load engines and providers",
    ),
    ("OPENSSL_ENGINES", "OpenSSL loads engines from it"),
    ("OPENSSL_MODULES", "OpenSSL loads providers from it"),
    // Interpreters: code run at start, and where modules load from.
    ("PYTHONSTARTUP", "python runs the file it names at start"),
    ("PYTHONPATH", "it chooses the modules python imports"),
    ("PYTHONHOME", "it chooses the standard library python loads"),
    (
        "PYTHONUSERBASE",
        "it chooses the site packages python loads at start",
    ),
    ("PYTHONBREAKPOINT", "python imports and calls what it names"),
    ("PYTHONWARNINGS", "python imports the modules it names"),
    ("NODE_OPTIONS", "it adds node options, such as --require"),
    ("NODE_PATH", "it chooses the modules node loads"),
    ("PERL5OPT", "it adds perl options, such as -M"),
    ("PERL5LIB", "it chooses the modules perl loads"),
    ("PERLLIB", "it chooses the modules perl loads"),
    ("PERL5DB", "perl runs it as the debugger"),
    ("RUBYOPT", "it adds ruby options, such as -r"),
    ("RUBYLIB", "it chooses the libraries ruby loads"),
    (
        "JAVA_TOOL_OPTIONS",
        "it adds JVM options, such as -javaagent",
    ),
    ("_JAVA_OPTIONS", "it adds JVM options, such as -javaagent"),
    (
        "JDK_JAVA_OPTIONS",
        "it adds JVM options, such as -javaagent",
    ),
    ("PHPRC", "it chooses the php.ini php reads"),
    ("PHP_INI_SCAN_DIR", "it adds php.ini files php reads"),
    // Commands that other programs start.
    ("GIT_SSH", "git runs it"),
    ("GIT_SSH_COMMAND", "git runs it"),
    ("GIT_EXEC_PATH", "git runs its commands from it"),
    ("GIT_ASKPASS", "git runs it"),
    ("GIT_EDITOR", "git runs it"),
    ("GIT_PAGER", "git runs it"),
    ("GIT_EXTERNAL_DIFF", "git runs it"),
    ("GIT_PROXY_COMMAND", "git runs it"),
    ("GIT_TEMPLATE_DIR", "git copies hooks from it"),
    ("SSH_ASKPASS", "ssh runs it"),
    ("SUDO_ASKPASS", "sudo runs it"),
    ("EDITOR", "programs run it to edit a file"),
    ("VISUAL", "programs run it to edit a file"),
    ("PAGER", "programs run it to show their output"),
    ("MANPAGER", "man runs it"),
    ("LESSOPEN", "less runs it on every file it opens"),
    ("LESSCLOSE", "less runs it on every file it closes"),
    ("BROWSER", "programs run it to open a link"),
];

/// Why `name` is refused in a handoff's environment, or `None` when it is
/// allowed.
pub fn refused_env_reason(name: &str) -> Option<&'static str> {
    REFUSED_ENV_NAMES
        .iter()
        .find(|(refused, _)| *refused == name)
        .or_else(|| {
            REFUSED_ENV_PREFIXES
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
        })
        .map(|(_, why)| *why)
}

/// Checks a handoff's environment against the attach boundary (C29).
///
/// # Errors
/// [`DomainError::InvalidInput`] naming every refused name and why.
pub fn check_attach_environment(environment: &BTreeMap<String, String>) -> DomainResult<()> {
    let refused: Vec<String> = environment
        .keys()
        .filter_map(|name| refused_env_reason(name).map(|why| format!("{name:?} ({why})")))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    let (noun, verb) = if refused.len() == 1 {
        ("name", "is")
    } else {
        ("names", "are")
    };
    Err(DomainError::invalid(format!(
        "environment {noun} {} {verb} refused: an attach command's environment must not change \
         how programs load or start (contract C29); open the handoff without it",
        refused.join(", ")
    )))
}
