//! Where a person attaches to the agent: its tmux session when the agent
//! runs inside tmux (`$TMUX` set; the session is the one of the agent's
//! pane, `tmux display-message -p -t $TMUX_PANE '#S'`), else a command
//! that says so honestly, since nothing can attach to a plain terminal.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::input::Agent;

/// The attach command of a handoff the hook opens for `agent`, and whether
/// it attaches to tmux.
pub fn attach_argv(
    agent: Agent,
    cwd: &Path,
    lookup: impl Fn(&str) -> Option<String>,
) -> (Vec<String>, bool) {
    if lookup("TMUX").is_some_and(|value| !value.is_empty()) {
        if let Some(session) = tmux_session(lookup("TMUX_PANE").as_deref()) {
            return (
                vec!["tmux".into(), "attach-session".into(), "-t".into(), session],
                true,
            );
        }
    }
    (
        vec![
            "echo".into(),
            format!(
                "{} runs outside tmux, in a terminal lf-handoff cannot attach to; answer here, \
                 or at that terminal (in {})",
                agent.display_name(),
                cwd.display()
            ),
        ],
        false,
    )
}

/// The name of the tmux session of `pane` (or of the current client), as
/// tmux prints it; `None` when tmux is not there or says nothing.
fn tmux_session(pane: Option<&str>) -> Option<String> {
    let mut command = Command::new("tmux");
    command.arg("display-message").arg("-p");
    if let Some(pane) = pane.filter(|pane| !pane.is_empty()) {
        command.arg("-t").arg(pane);
    }
    let output = command
        .arg("#S")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let name = String::from_utf8(output.stdout).ok()?;
    let name = name.trim();
    (!name.is_empty() && !name.chars().any(char::is_control)).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_tmux_the_command_says_so() {
        let (argv, tmux) = attach_argv(Agent::Codex, Path::new("/w"), |_| None);
        assert!(!tmux);
        assert_eq!(argv[0], "echo");
        assert!(argv[1].contains("outside tmux"), "{argv:?}");
    }
}
