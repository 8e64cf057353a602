//! `lf-handoff hook`: the agents' own hooks (C27, docs/HOOKS.md).
//!
//! `hook claude-code` and `hook codex` run inside the agent: whatever
//! fails, they exit 0 with nothing on stdout and one line on stderr, so
//! the agent shows its own prompt. Only a person's decision prints. The
//! store is chosen as for every command (`--store`, `LF_HANDOFF_STORE`,
//! the config file, the default file), and a served store takes the
//! agent's token as every command does.
//!
//! `hook install` and `hook uninstall` change the agent's settings file
//! and are ordinary commands: a file the agent could not read either is
//! refused (exit 2), with nothing changed.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use lf_handoff_adapters::{open_store, Store, UnavailableKind};
use lf_handoff_agents::install::{self, InstallError, Scope};
use lf_handoff_agents::{Agent, HookConfig, HookError, HookFlags};

use crate::error::{CliError, CliResult};
use crate::output::emit;
use crate::store_select::{self, Environment};

/// How long a hook's store calls retry a store that cannot be reached:
/// short, so a hook never outlives the agent's patience.
const HOOK_RETRY_WINDOW: Duration = Duration::from_secs(1);

/// Claude Code's and Codex's own hooks, and their install: a permission
/// request or an idle prompt becomes a handoff a person answers from
/// anywhere (docs/HOOKS.md).
#[derive(Debug, Args)]
pub struct HookArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: HookCommand,
}

/// `hook`'s commands.
#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code's hook: reads its hook input on stdin; a permission
    /// request waits for a person (--wait) and prints the decision.
    ///
    /// Exits 0 whatever happens; without a person's decision it prints
    /// nothing, and Claude Code shows its own prompt.
    ClaudeCode(HookRunArgs),
    /// Codex's hook: reads its hook input on stdin (or, as Codex's
    /// `notify` program, the JSON given as the last argument).
    ///
    /// Exits 0 whatever happens; without a person's decision it prints
    /// nothing, and Codex shows its own prompt.
    Codex(CodexArgs),
    /// Add the hooks to the agent's settings file, keeping what is there
    /// (a backup is written beside it); running it twice changes nothing.
    Install(InstallArgs),
    /// Remove the hooks `install` added, and nothing else.
    Uninstall(InstallArgs),
}

/// `hook claude-code`
#[derive(Debug, Args)]
pub struct HookRunArgs {
    /// How long a permission request waits for a person (default 50s, or
    /// LF_HANDOFF_HOOK_WAIT); keep it below the agent's hook timeout.
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
    /// The deadline of each handoff (default 1h, or
    /// LF_HANDOFF_HOOK_EXPIRES_IN; `never` for none).
    #[arg(long, value_name = "DURATION")]
    pub expires_in: Option<String>,
    /// What a permission handoff answers at its deadline: allow, deny or
    /// none (default none, or LF_HANDOFF_HOOK_ON_EXPIRY).
    #[arg(long, value_name = "ANSWER")]
    pub on_expiry: Option<String>,
    /// Open under this parent (wave:ID, project:ID, task:ID) instead of
    /// the session's own wave (default: LF_HANDOFF_PARENT).
    #[arg(long, value_name = "PARENT")]
    pub parent: Option<String>,
}

/// `hook codex`
#[derive(Debug, Args)]
pub struct CodexArgs {
    #[command(flatten)]
    pub run: HookRunArgs,
    /// Codex's `notify` payload (JSON), when run as its notify program.
    pub payload: Option<String>,
}

/// The agents, as `hook install` names them.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AgentName {
    /// Claude Code.
    ClaudeCode,
    /// Codex.
    Codex,
}

/// `hook install` and `hook uninstall`
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The agent whose settings to change.
    #[arg(value_enum)]
    pub agent: AgentName,
    /// The user's settings (the default): ~/.claude/settings.json, or
    /// $CODEX_HOME/hooks.json (~/.codex/hooks.json).
    #[arg(long, conflicts_with = "project")]
    pub user: bool,
    /// The current project's: .claude/settings.json or .codex/hooks.json.
    #[arg(long)]
    pub project: bool,
    /// (install) How long a permission request waits for a person; the
    /// agent's timeout for the hook is set 10 s longer.
    #[arg(long, value_name = "DURATION", value_parser = parse_wait)]
    pub wait: Option<Duration>,
    /// (install) The program the agent runs; default: this lf-handoff.
    #[arg(long, value_name = "PATH")]
    pub program: Option<PathBuf>,
}

/// Whether `args` (this process's, program first) run an agent's hook:
/// then even a usage error exits 0 (the agent must go on).
pub fn runs_agent_hook(args: impl Iterator<Item = OsString>) -> Option<&'static str> {
    let words: Vec<OsString> = args.skip(1).filter(|a| !a.is_empty()).collect();
    let at = words.iter().position(|word| word == "hook")?;
    match words.get(at + 1).and_then(|word| word.to_str()) {
        Some("claude-code") => Some("claude-code"),
        Some("codex") => Some("codex"),
        _ => None,
    }
}

/// Logs why an agent's hook decided nothing: one line on stderr.
pub fn log(agent: &str, message: &dyn std::fmt::Display) {
    crate::output::note(&format!("lf-handoff hook {agent}: {message}"));
}

/// The global flags a hook uses.
#[derive(Debug)]
pub struct Globals {
    /// `--store`.
    pub store: Option<String>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--token-file`.
    pub token_file: Option<PathBuf>,
}

/// Runs a `hook` command.
///
/// # Errors
/// Only `install` and `uninstall` fail (exit 2 for a settings file of
/// another shape, 5 when it cannot be written); the agents' hooks never do.
pub async fn run(args: HookArgs, globals: Globals) -> CliResult<()> {
    match args.command {
        HookCommand::ClaudeCode(args) => {
            agent_hook(Agent::ClaudeCode, &args, None, globals).await;
            Ok(())
        }
        HookCommand::Codex(args) => {
            agent_hook(Agent::Codex, &args.run, args.payload.as_deref(), globals).await;
            Ok(())
        }
        HookCommand::Install(args) => change_settings(&args, true),
        HookCommand::Uninstall(args) => change_settings(&args, false),
    }
}

/// Runs an agent's hook: prints a decision, or logs why there is none.
async fn agent_hook(agent: Agent, args: &HookRunArgs, payload: Option<&str>, globals: Globals) {
    match decide(agent, args, payload, globals).await {
        Ok((decision, note)) => {
            if let Some(decision) = decision {
                let _ = emit(&decision);
            }
            if let Some(note) = note {
                log(agent.as_str(), &note);
            }
        }
        Err(error) => log(agent.as_str(), &error),
    }
}

async fn decide(
    agent: Agent,
    args: &HookRunArgs,
    payload: Option<&str>,
    globals: Globals,
) -> Result<(Option<String>, Option<String>), HookError> {
    let stdin = match payload {
        Some(_) => String::new(),
        None => read_stdin()?,
    };
    let event = lf_handoff_agents::parse(agent, &stdin, payload)?;
    let flags = HookFlags {
        wait: args.wait.clone(),
        expires_in: args.expires_in.clone(),
        on_expiry: args.on_expiry.clone(),
        parent: args.parent.clone(),
    };
    let lookup = |name: &str| std::env::var(name).ok();
    let config = HookConfig::resolve(&flags, lookup)?;
    let store = open(globals).await?;
    let outcome = lf_handoff_agents::handle(&store, &event, &config, lookup).await?;
    Ok((outcome.decision.map(|d| d.render()), outcome.note))
}

/// Opens the store every command would, retrying an unreachable one only
/// briefly.
async fn open(globals: Globals) -> Result<Store, HookError> {
    let environment = Environment::from_process();
    let mut config = store_select::select(
        globals.store.as_deref(),
        globals.config.as_deref(),
        &environment,
    )
    .map_err(|e| HookError::new(format!("store: {e}")))?;
    store_select::through_service(&mut config, globals.token_file, (None, false), false)
        .map_err(|e| HookError::new(format!("store: {e}")))?;
    let shared = config.shared_with_other_processes();
    let store = open_store(&shared)
        .await
        .map_err(|e| HookError::new(format!("store {}: {e}", shared.url())))?;
    Ok(store.with_retry_window(HOOK_RETRY_WINDOW))
}

fn read_stdin() -> Result<String, HookError> {
    let mut text = String::new();
    let limit = lf_handoff_agents::MAX_INPUT_BYTES as u64 + 1;
    std::io::stdin()
        .lock()
        .take(limit)
        .read_to_string(&mut text)
        .map_err(|e| HookError::new(format!("cannot read the hook input: {e}")))?;
    Ok(text)
}

/// `hook install` (`add`) and `hook uninstall`.
fn change_settings(args: &InstallArgs, add: bool) -> CliResult<()> {
    let agent = match args.agent {
        AgentName::ClaudeCode => Agent::ClaudeCode,
        AgentName::Codex => Agent::Codex,
    };
    let scope = if args.project {
        Scope::Project
    } else {
        Scope::User
    };
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::usage(format!("the current directory is unreadable: {e}")))?;
    let lookup = |name: &str| std::env::var(name).ok();
    let path = install::settings_path(agent, scope, &cwd, lookup).map_err(refused)?;
    let before = install::read_settings(&path).map_err(refused)?;
    let (after, changes) = if add {
        let program = match &args.program {
            Some(program) => program.clone(),
            None => std::env::current_exe()
                .map_err(|e| CliError::usage(format!("cannot find this program: {e}")))?,
        };
        let program = install::shell_quote(&program.display().to_string());
        let entries = install::entries(agent, &program, args.wait);
        install::install(before.as_deref(), agent, &entries)
    } else {
        install::uninstall(before.as_deref(), agent)
    }
    .map_err(|e| refused(e).hint(format!("fix or move {} and run it again", path.display())))?;
    if changes.is_empty() {
        return emit(&format!(
            "{}: unchanged ({})\n",
            path.display(),
            if add {
                "the hooks are there already"
            } else {
                "none of ours to remove"
            }
        ));
    }
    let backup = install::write_settings(&path, before.as_deref(), &after).map_err(refused)?;
    let mut text = format!("{}:\n", path.display());
    for change in &changes {
        text.push_str(&format!("  {change}\n"));
    }
    if let Some(backup) = backup {
        text.push_str(&format!(
            "  (the file as it was is in {})\n",
            backup.display()
        ));
    }
    if add && agent == Agent::Codex {
        text.push_str(
            "  Codex runs hooks.json when its `hooks` feature is on (the default in current \
             releases; older ones need `[features] codex_hooks = true` in config.toml), and a \
             project's .codex/ only in a trusted project.\n",
        );
    }
    emit(&text)
}

/// Parses `hook install --wait`: a duration no longer than a hook may wait.
fn parse_wait(text: &str) -> Result<Duration, String> {
    let wait = crate::duration::parse(text).map_err(|e| e.to_string())?;
    if wait.is_zero() || wait > lf_handoff_agents::MAX_WAIT {
        return Err(format!(
            "a wait must be between 1s and {}s",
            lf_handoff_agents::MAX_WAIT.as_secs()
        ));
    }
    Ok(wait)
}

fn refused(error: InstallError) -> CliError {
    match error {
        InstallError::Invalid(message) => CliError::usage(message),
        InstallError::Io(message, error) => CliError::unavailable(
            UnavailableKind::of_io_error(&error),
            format!("{message}: {error}"),
        ),
    }
}
