//! `attach` from inside tmux: a person whose terminal is itself a tmux
//! client (`$TMUX` set) cannot run `tmux attach-session` there (tmux
//! refuses: "sessions should be nested with care"). When a handoff's
//! command attaches to a session of the tmux server that client belongs
//! to, `attach` switches the client to that session instead
//! (`tmux switch-client -t SESSION`), as tmux session managers do.
//!
//! This module only reads argv: it recognises `tmux [global options]
//! attach-session|attach|a... [options] -t SESSION` (getopt's forms,
//! `-dt agent` as well as `-d -t agent`) and works out which server the
//! command names, as tmux itself does: `-S PATH`, else `-L NAME` under
//! `$TMUX_TMPDIR` (or `/tmp`) `/tmux-UID/`, else, inside tmux, the server
//! of `$TMUX`. Anything else (no `-t`, a command list, another command, a
//! `-c` shell command) is not a plain attach, and runs as stored.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What a handoff's `tmux attach-session` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmuxAttach {
    /// The words before the subcommand (`tmux` and its global options),
    /// kept for `switch-client` so it talks to the same server.
    global: Vec<String>,
    /// The server's socket, when the command names one (`-S`, `-L`).
    socket: Option<PathBuf>,
    /// The session to attach to (`-t`).
    target: String,
}

/// How `attach` joins a tmux session from where the person is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmuxJoin {
    /// The person's terminal is a client of the same tmux server: switch
    /// it to the session. The argv to run.
    Switch(Vec<String>),
    /// The person is inside tmux, but the session is on another tmux
    /// server: a client of that server runs nested in this pane (with
    /// `TMUX` unset, as tmux's message says to).
    Nested,
}

/// tmux's global options that take a value (tmux 3.x `tmux.c`).
const GLOBAL_WITH_VALUE: &[char] = &['c', 'f', 'L', 'S', 'T'];
/// tmux's global options without one.
const GLOBAL_FLAGS: &[char] = &['2', 'C', 'D', 'l', 'N', 'u', 'v', 'V'];
/// `attach-session`'s options that take a value.
const ATTACH_WITH_VALUE: &[char] = &['c', 'f', 't'];
/// `attach-session`'s options without one.
const ATTACH_FLAGS: &[char] = &['d', 'E', 'r', 'x'];

impl TmuxAttach {
    /// The attach that `argv` makes, if it is a plain `tmux attach` to a
    /// named session.
    pub fn parse(argv: &[String]) -> Option<Self> {
        let (program, rest) = argv.split_first()?;
        let (global_options, position, attach_options) = plain_attach(argv)?;
        let target = attach_options
            .into_iter()
            .rev()
            .find(|(flag, _)| *flag == 't')
            .and_then(|(_, value)| value)?;
        let socket = global_options
            .iter()
            .rev()
            .find(|(flag, _)| *flag == 'S')
            .and_then(|(_, value)| value.as_ref().map(PathBuf::from))
            .or_else(|| {
                global_options
                    .iter()
                    .rev()
                    .find(|(flag, _)| *flag == 'L')
                    .and_then(|(_, value)| value.as_deref().map(labelled_socket))
            });
        let mut global = vec![program.clone()];
        global.extend(rest[..position].iter().cloned());
        Some(Self {
            global,
            socket,
            target,
        })
    }

    /// How to join the session from a terminal whose `$TMUX` is `tmux`
    /// (`None` or empty: not inside tmux, so the command runs as stored).
    pub fn join_from(&self, tmux: Option<&OsString>) -> Option<TmuxJoin> {
        let tmux = tmux.filter(|value| !value.is_empty())?;
        let client_socket = tmux.to_string_lossy();
        let client_socket = client_socket.split(',').next().unwrap_or_default();
        let same_server = match &self.socket {
            None => true,
            Some(socket) => same_path(socket, Path::new(client_socket)),
        };
        if !same_server {
            return Some(TmuxJoin::Nested);
        }
        let mut argv = self.global.clone();
        argv.extend([
            "switch-client".to_string(),
            "-t".to_string(),
            self.target.clone(),
        ]);
        Some(TmuxJoin::Switch(argv))
    }

    /// The session the command attaches to.
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// The global options, the subcommand's position among the words after
/// the program, and the attach options of `argv`, if it is a plain `tmux
/// attach-session` (or an abbreviation of it): tmux's own global options
/// but `-c` (which runs a shell command) and `-f` (a configuration file,
/// which a server that the attach starts would run), the attach's own
/// options, and
/// nothing after them (no second command, such as `\; run-shell ...`).
/// Such a command joins a session and starts nothing.
#[allow(clippy::type_complexity)]
pub fn plain_attach(
    argv: &[String],
) -> Option<(
    Vec<(char, Option<String>)>,
    usize,
    Vec<(char, Option<String>)>,
)> {
    let (program, rest) = argv.split_first()?;
    if Path::new(program).file_name()? != "tmux" {
        return None;
    }
    let (global_options, position) = options(rest, GLOBAL_WITH_VALUE, GLOBAL_FLAGS)?;
    // `-c` runs a shell command instead of a tmux command; `-f` names a
    // configuration file, whose commands a server the attach starts runs.
    if global_options
        .iter()
        .any(|(flag, _)| matches!(flag, 'c' | 'f'))
    {
        return None;
    }
    let command = rest.get(position)?;
    if command.is_empty() || !"attach-session".starts_with(command.as_str()) {
        return None;
    }
    let (attach_options, end) = options(&rest[position + 1..], ATTACH_WITH_VALUE, ATTACH_FLAGS)?;
    if position + 1 + end != rest.len() {
        // Arguments after the options: another command (`\;`).
        return None;
    }
    Some((global_options, position, attach_options))
}

/// Reads getopt-style options from the start of `words` (`-ab`, `-tNAME`,
/// `-t NAME`, `--` ends them). Returns them and where the first other word
/// is, or `None` for an unknown option or a missing value.
#[allow(clippy::type_complexity)]
fn options(
    words: &[String],
    with_value: &[char],
    flags: &[char],
) -> Option<(Vec<(char, Option<String>)>, usize)> {
    let mut found = Vec::new();
    let mut index = 0;
    while let Some(word) = words.get(index) {
        if word == "--" {
            return Some((found, index + 1));
        }
        let Some(letters) = word.strip_prefix('-').filter(|letters| !letters.is_empty()) else {
            break;
        };
        index += 1;
        for (offset, letter) in letters.char_indices() {
            if flags.contains(&letter) {
                found.push((letter, None));
            } else if with_value.contains(&letter) {
                let attached = &letters[offset + letter.len_utf8()..];
                let value = if attached.is_empty() {
                    let value = words.get(index)?.clone();
                    index += 1;
                    value
                } else {
                    attached.to_string()
                };
                found.push((letter, Some(value)));
                break;
            } else {
                return None;
            }
        }
    }
    Some((found, index))
}

/// The socket of `tmux -L NAME`: `$TMUX_TMPDIR` (or `/tmp`), then
/// `tmux-UID/NAME`.
fn labelled_socket(name: &str) -> PathBuf {
    let directory = std::env::var_os("TMUX_TMPDIR")
        .filter(|value| !value.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    directory.join(format!("tmux-{}", current_uid())).join(name)
}

/// The real user id of this process, read from `/proc/self/status`
/// (0 when that cannot be read, which only changes which socket a `-L`
/// names, so a switch then falls back to a nested client).
fn current_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next())
                .and_then(|uid| uid.parse().ok())
        })
        .unwrap_or(0)
}

/// Whether two socket paths name one file (compared as written when
/// either cannot be resolved).
fn same_path(left: &Path, right: &Path) -> bool {
    match (left.canonicalize(), right.canonicalize()) {
        (Ok(left), Ok(right)) => left == right,
        _ => left == right,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| (*word).to_string()).collect()
    }

    fn inside(socket: &str) -> OsString {
        OsString::from(format!("{socket},4242,0"))
    }

    #[test]
    fn plain_attaches_are_recognised_in_getopt_forms() {
        for words in [
            &["tmux", "attach-session", "-t", "agent"][..],
            &["tmux", "attach", "-t", "agent"],
            &["tmux", "a", "-t", "agent"],
            &["tmux", "attach", "-tagent"],
            &["tmux", "attach", "-dt", "agent"],
            &["tmux", "attach", "-d", "-r", "-t", "agent"],
            &["/usr/bin/tmux", "-u", "attach-session", "-t", "agent"],
            &["tmux", "attach", "-t", "other", "-t", "agent"],
        ] {
            let attach = TmuxAttach::parse(&argv(words)).unwrap_or_else(|| panic!("{words:?}"));
            assert_eq!(attach.target(), "agent", "{words:?}");
        }
    }

    #[test]
    fn anything_else_runs_as_stored() {
        for words in [
            &["tmux", "attach"][..],
            &["tmux", "new-session", "-t", "agent"],
            &["tmux", "attach", "-t", "agent", ";", "kill-server"],
            &["tmux", "-c", "attach -t agent"],
            &["tmux", "attach", "-q", "-t", "agent"],
            &["tmux", "attach", "-t"],
            &["tmux", "-L"],
            &["tmuxx", "attach", "-t", "agent"],
            &["sh", "-c", "tmux attach -t agent"],
            &["tmux", ""],
            &[],
        ] {
            assert_eq!(TmuxAttach::parse(&argv(words)), None, "{words:?}");
        }
    }

    #[test]
    fn outside_tmux_nothing_changes() {
        let attach = TmuxAttach::parse(&argv(&["tmux", "attach", "-t", "agent"])).unwrap();
        assert_eq!(attach.join_from(None), None);
        assert_eq!(attach.join_from(Some(&OsString::new())), None);
    }

    #[test]
    fn inside_tmux_the_same_server_switches_the_client() {
        let attach =
            TmuxAttach::parse(&argv(&["tmux", "-u", "attach", "-d", "-t", "agent"])).unwrap();
        assert_eq!(
            attach.join_from(Some(&inside("/tmp/tmux-0/default"))),
            Some(TmuxJoin::Switch(argv(&[
                "tmux",
                "-u",
                "switch-client",
                "-t",
                "agent"
            ])))
        );
        let named =
            TmuxAttach::parse(&argv(&["tmux", "-S", "/run/x.sock", "a", "-tagent"])).unwrap();
        assert_eq!(
            named.join_from(Some(&inside("/run/x.sock"))),
            Some(TmuxJoin::Switch(argv(&[
                "tmux",
                "-S",
                "/run/x.sock",
                "switch-client",
                "-t",
                "agent"
            ])))
        );
    }

    #[test]
    fn inside_tmux_another_server_nests() {
        let named =
            TmuxAttach::parse(&argv(&["tmux", "-S", "/run/x.sock", "a", "-tagent"])).unwrap();
        assert_eq!(
            named.join_from(Some(&inside("/run/y.sock"))),
            Some(TmuxJoin::Nested)
        );
        let labelled = TmuxAttach::parse(&argv(&["tmux", "-L", "agents", "a", "-tagent"])).unwrap();
        assert_eq!(
            labelled.join_from(Some(&inside("/nowhere/tmux-0/default"))),
            Some(TmuxJoin::Nested)
        );
    }
}
