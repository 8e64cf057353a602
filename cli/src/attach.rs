//! `attach`: records the attach, then joins the work.
//!
//! - `--print` prints the descriptor (after recording the attach) and runs
//!   nothing: for a person who wants to see the command, or a presentation
//!   adapter that runs it in its own terminal.
//! - A local home runs the attach argv directly, with no shell, so nothing
//!   in it is ever re-parsed: the process *replaces* `lf-handoff` (`exec`),
//!   with the descriptor's environment added and its cwd set. The exit code
//!   is then the command's own, signals reach it as if it had been started
//!   directly, and no `lf-handoff` process lingers while a person works.
//! - Inside tmux (`$TMUX` set), a command that attaches to a session of
//!   the same tmux server switches this client to it
//!   (`tmux switch-client -t SESSION`) instead of nesting a client, which
//!   tmux refuses; one of another server runs nested with `TMUX` unset
//!   ([`crate::tmux`]).
//! - A remote home (`ssh://...`) prints the `ssh` command that attaches on
//!   that host, every word quoted for a shell, instead of running anything.
//!
//! The attach boundary (contract C29): without `--print`, before the attach
//! is recorded, a handoff whose environment holds a name `open` refuses
//! (one an earlier release stored) is refused as `open` would refuse it,
//! and on this machine a command whose program is not on the allow-list
//! ([`crate::allow`]) is refused, naming the program and how to allow it;
//! neither writes anything. Before running, the whole command and every
//! environment name it sets are shown on stderr. `--print` runs nothing,
//! so it always prints.

use std::io::ErrorKind;
use std::os::unix::process::CommandExt;
use std::process::Command;

use lf_handoff_adapters::StoreError;
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    check_attach_environment, AttachDescriptor, InteractiveHandoff,
};
use lf_handoff_domain::wave_home::WaveHome;
use serde::Serialize;

use crate::allow::AllowList;
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{
    descriptor_block, descriptor_block_running, emit, emit_json, environment_names, note,
    printable, shell_line, shell_words,
};
use crate::tmux::{TmuxAttach, TmuxJoin};

/// The JSON of `attach` on a remote home.
#[derive(Debug, Serialize)]
pub struct RemoteAttach<'a> {
    /// The command to run in a local shell to attach.
    pub ssh_command: String,
    /// What the command does on the remote host.
    pub descriptor: &'a AttachDescriptor,
}

/// What `attach` does after recording the attach.
#[derive(Debug)]
pub enum Mode {
    /// `--print`: print the descriptor and run nothing.
    Print,
    /// Run the command (or print a remote home's `ssh` command), when the
    /// allow-list allows its program.
    Run(AllowList),
}

/// Records the attach and prints or prepares what to run. Returns the
/// command to `exec` for a local attach without `--print`.
///
/// # Errors
/// Exit 3 for an unknown id, 4 for a finished handoff; without `--print`,
/// exit 2 (`invalid_input`) for an environment `open` refuses, 126
/// (`program_not_allowed`) for a program not on the allow-list, both
/// before the attach is recorded; 126 when the handoff's directory does
/// not exist here.
pub async fn attach(
    ctx: &Context,
    id: &InteractiveHandoffId,
    mode: &Mode,
) -> CliResult<Option<Command>> {
    let mut checked = false;
    if let Mode::Run(allowed) = mode {
        // An unknown or finished handoff is left to the attach below, so
        // it fails as it always has.
        let stored = ctx
            .store
            .get_interactive_handoff(id)
            .await
            .map_err(|e| ctx.fail(e))?;
        if let Some(handoff) = stored.filter(|handoff| handoff.is_active()) {
            check_before_running(&handoff, allowed)?;
            checked = true;
        }
    }
    let print = matches!(mode, Mode::Print);
    let handoff = ctx
        .store
        .attach_interactive_handoff(id)
        .await
        .map_err(|e| ctx.fail(e))?;
    if let (Mode::Run(allowed), false) = (mode, checked) {
        // The handoff was not active when read, yet the attach succeeded:
        // what runs is checked all the same.
        check_before_running(&handoff, allowed)?;
    }
    let descriptor = handoff.attach_descriptor();
    let local = !matches!(handoff.home, WaveHome::Ssh { .. });
    let join = TmuxAttach::parse(&descriptor.argv)
        .filter(|_| local)
        .and_then(|attach| Some((attach.join_from(std::env::var_os("TMUX").as_ref())?, attach)));
    if print {
        print_descriptor(ctx, &descriptor, &handoff.home, join.as_ref())?;
        return Ok(None);
    }
    if !local {
        let ssh_command = shell_line(&descriptor, &handoff.home);
        if ctx.json {
            emit_json(&RemoteAttach {
                ssh_command,
                descriptor: &descriptor,
            })?;
        } else {
            note(&format!(
                "{} runs on {}; attach recorded. Run this to join it:",
                handoff.id, handoff.home
            ));
            emit(&format!("{ssh_command}\n"))?;
        }
        return Ok(None);
    }
    local_command(ctx, &handoff.id, &descriptor, join.as_ref()).map(Some)
}

/// The attach boundary (C29): refuses a handoff whose environment `open`
/// refuses, and on this machine a command whose program is not allowed.
/// A remote home's command runs only when the person runs the printed
/// `ssh` command, so it is not held to this machine's allow-list.
///
/// # Errors
/// Exit 2 (`invalid_input`) naming the environment names, or 126
/// (`program_not_allowed`) naming the program.
fn check_before_running(handoff: &InteractiveHandoff, allowed: &AllowList) -> CliResult<()> {
    check_attach_environment(&handoff.environment).map_err(|error| {
        CliError::from(StoreError::from(error)).hint(format!(
            "only an earlier release stores such a handoff; `lf-handoff attach {} --print` \
             shows it without running it",
            handoff.id
        ))
    })?;
    if matches!(handoff.home, WaveHome::Ssh { .. }) {
        return Ok(());
    }
    allowed.check(&handoff.id, &handoff.attach_argv)
}

/// `attach --print`: the descriptor, or the tmux switch that would run.
fn print_descriptor(
    ctx: &Context,
    descriptor: &AttachDescriptor,
    home: &WaveHome,
    join: Option<&(TmuxJoin, TmuxAttach)>,
) -> CliResult<()> {
    if ctx.json {
        emit_json(descriptor)
    } else if let Some((TmuxJoin::Switch(switch), _)) = join {
        emit(&descriptor_block_running(descriptor, shell_words(switch)))
    } else {
        emit(&descriptor_block(descriptor, home))
    }
}

/// The command that joins a handoff of this machine: a tmux client switch
/// when the terminal is a client of the session's tmux server, else the
/// handoff's own command (nested in this tmux pane for another server).
fn local_command(
    ctx: &Context,
    id: &InteractiveHandoffId,
    descriptor: &AttachDescriptor,
    join: Option<&(TmuxJoin, TmuxAttach)>,
) -> CliResult<Command> {
    if !descriptor.cwd.is_dir() {
        return Err(CliError::cannot_execute(format!(
            "the handoff's directory {} is not a directory on this machine; \
                 the attach was recorded, but the command cannot run here",
            printable(&descriptor.cwd.display().to_string())
        )));
    }
    let Some((program, arguments)) = descriptor.argv.split_first() else {
        return Err(CliError::cannot_execute(format!(
            "handoff {id} has no attach command"
        )));
    };
    if let Some((TmuxJoin::Switch(switch), attach)) = join {
        if !ctx.json {
            note(&format!(
                "{} waits in tmux session {}; switching this tmux client to it: {}",
                id,
                printable(attach.target()),
                shell_words(switch)
            ));
        }
        let (program, arguments) = switch.split_first().unwrap_or((program, arguments));
        let mut command = Command::new(program);
        command.args(arguments).current_dir(&descriptor.cwd);
        return Ok(command);
    }
    if !ctx.json {
        let environment = if descriptor.environment.is_empty() {
            "none added".to_string()
        } else {
            environment_names(&descriptor.environment)
        };
        note(&format!(
            "attaching to {}: {} (in {}; environment: {environment})",
            id,
            shell_words(&descriptor.argv),
            printable(&descriptor.cwd.display().to_string())
        ));
        if let Some((TmuxJoin::Nested, _)) = join {
            note(
                "the session is on another tmux server than this terminal's: \
                 its client runs nested in this pane",
            );
        }
    }
    let mut command = Command::new(program);
    command
        .args(arguments)
        .envs(&descriptor.environment)
        .current_dir(&descriptor.cwd);
    if let Some((TmuxJoin::Nested, _)) = join {
        command.env_remove("TMUX");
    }
    Ok(command)
}

/// Replaces this process with `command`. Returns only when that fails.
pub fn exec(mut command: Command) -> CliError {
    let program = command.get_program().to_string_lossy().into_owned();
    let error = command.exec();
    let program = printable(&program).into_owned();
    match error.kind() {
        ErrorKind::NotFound => {
            CliError::command_not_found(format!("cannot run {program:?}: command not found"))
                .hint("install it, or check PATH and the handoff's attach command")
        }
        _ => CliError::cannot_execute(format!("cannot run {program:?}: {error}")),
    }
}
