//! # lf-handoff
//!
//! The command line of the lf-handoff registry (docs/CONTRACT.md): people
//! at a terminal and presentation adapters list, attach and finish
//! interactive handoffs with it; scripts and bodies open them and claim
//! their wakes.
//!
//! The path of every command is config -> `open_store` -> `Store` ->
//! output. The binary reaches stores through `lf-handoff-adapters` alone
//! (it also links `lf-handoff-server` for `serve` and `lf-handoff-api` for
//! the service's JSON shapes) and opens whatever backend the store URL
//! names, so a new backend needs no change here.
//!
//! ## Design decisions
//!
//! - **Lean start-up.** One current-thread tokio runtime, the store opened
//!   only by commands that use it, nothing read past the winning store
//!   source: `lf-handoff status ID` is one store open and one read.
//! - **One error line, one exit code.** Every failure, clap's usage errors
//!   included, is one line on stderr (`error: ...`, or with `--json` one
//!   JSON object with the error's kind) and exit 2 (usage), 3 (not found),
//!   4 (conflict, `expired` included) or 5 (storage unavailable).
//! - **Deadlines from now.** `open --expires-in` and `extend --by` count
//!   from the store's clock at the call, so a retried command sets the
//!   same deadline (`duration.rs` parses the durations).
//! - **Data on stdout, narration on stderr.** Human output of the commands
//!   that create something prints the new id on stdout and a note on
//!   stderr, so `ID=$(lf-handoff ...)` works without a JSON parser.
//! - **No shell.** `attach` runs the stored argv with `exec`, never through
//!   a shell; what it prints for a shell is quoted word by word.
//!
//! `docs/CLI.md` records the decisions docs/CONTRACT.md leaves open.

mod allow;
mod answers;
mod archive;
mod args;
mod attach;
mod context;
mod demo;
mod duration;
mod error;
mod handoffs;
mod hook;
mod listen;
mod logging;
mod mcp;
mod output;
mod parents;
mod serve;
mod store_select;
mod tmux;
mod token;
mod wait;
mod watch;

use std::process::{Command as Process, ExitCode};

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use lf_handoff_domain::interactive_handoff::InteractiveHandoffOutcome;
use lf_handoff_domain::parent::Parent;

use crate::allow::AllowList;
use crate::args::{Cli, Command, ProjectCommand, TaskBodyArgs, TaskCommand, WaveCommand};
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{emit, emit_json, note};
use crate::store_select::Environment;

fn main() -> ExitCode {
    // Read before parsing, so a usage error is reported as JSON too.
    let json = wants_json(std::env::args_os());
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // An agent's hook never fails the agent, even called wrongly.
        Err(error) => match hook::runs_agent_hook(std::env::args_os()) {
            Some(agent) if !matches!(error.kind(), ErrorKind::DisplayHelp) => {
                hook::log(agent, &clap_one_line(&error.render().to_string()));
                return ExitCode::SUCCESS;
            }
            _ => return usage_error(&error, json),
        },
    };
    logging::init(cli.verbose);
    match run(cli) {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(process)) => attach::exec(process).report(json),
        Err(error) => error.report(json),
    }
}

/// Whether the command line asks for JSON: a `--json` before any `--`
/// (after it, words belong to the attach command).
fn wants_json(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.skip(1)
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json")
}

/// Runs a command. Returns the process `attach` replaces this one with,
/// which is started only after the runtime and the store are gone.
fn run(cli: Cli) -> CliResult<Option<Process>> {
    if let Command::Completions { shell } = cli.command {
        let mut command = Cli::command();
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command, "lf-handoff", &mut script);
        return emit(&String::from_utf8_lossy(&script)).map(|()| None);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::no_runtime(&e))?;
    runtime.block_on(dispatch(cli))
}

/// Chooses the store and opens it (the demo opens its own), checks the
/// files `export` and `import` name and the programs `attach` may run
/// first, and runs the command.
async fn dispatch(cli: Cli) -> CliResult<Option<Process>> {
    if let Command::Hook(command) = cli.command {
        let globals = hook::Globals {
            store: cli.store,
            config: cli.config,
            token_file: cli.token_file,
        };
        return hook::run(command, globals).await.map(|()| None);
    }
    let actor_flag = cli.actor.is_some();
    let actor = context::choose_actor(cli.actor, std::env::var_os(context::ACTOR_ENV).as_deref())?;
    if let Command::Token(command) = cli.command {
        return token::run(command, cli.json).map(|()| None);
    }
    if let Command::Demo = cli.command {
        return demo::demo(cli.store.as_deref(), cli.json, actor)
            .await
            .map(|()| None);
    }
    let environment = Environment::from_process();
    let mut config =
        store_select::select(cli.store.as_deref(), cli.config.as_deref(), &environment)?;
    let actor = store_select::through_service(
        &mut config,
        cli.token_file,
        (actor, actor_flag),
        matches!(cli.command, Command::Serve(_)),
    )?;
    if let Command::Serve(args) = cli.command {
        return serve::serve(config, args).await.map(|()| None);
    }
    // Over a service without a secret file of its own, the service makes
    // the link.
    if let (Command::Link(args), lf_handoff_adapters::StorageConfig::Http(http)) =
        (&cli.command, &config)
    {
        if args.link_secret.is_none() {
            return handoffs::link_through_service(http, args, cli.json)
                .await
                .map(|()| None);
        }
    }
    // Files are checked before the store is opened.
    let export_target = match &cli.command {
        Command::Export { output, force } => {
            Some(archive::prepare_export(output.as_deref(), *force)?)
        }
        _ => None,
    };
    let import_source = match &cli.command {
        Command::Import { input } => Some(archive::prepare_import(input.as_deref())?),
        _ => None,
    };
    // So is the allow-list of the programs `attach` may run (C29).
    let attach_mode = match &cli.command {
        Command::Attach { print: true, .. } => Some(attach::Mode::Print),
        Command::Attach { allow_program, .. } => Some(attach::Mode::Run(AllowList::load(
            allow_program,
            cli.config.as_deref(),
            &environment,
        )?)),
        _ => None,
    };
    let ctx = Context::open(&config, cli.json, actor).await?;
    if let Command::Mcp(args) = cli.command {
        return mcp::serve(ctx, &config, args).await.map(|()| None);
    }
    if let Some(target) = export_target {
        return archive::export(&ctx, target).await.map(|()| None);
    }
    if let Some(source) = import_source {
        return archive::import(&ctx, source).await.map(|()| None);
    }
    if let (Some(mode), Command::Attach { id, .. }) = (attach_mode, &cli.command) {
        return attach::attach(&ctx, id, &mode).await;
    }
    run_on_store(&ctx, cli.command).await.map(|()| None)
}

/// Runs a command on the open store.
async fn run_on_store(ctx: &Context, command: Command) -> CliResult<()> {
    match command {
        Command::Wave(WaveCommand::Create { name, repo }) => {
            let wave = parents::create_wave(&ctx.store, &name, &repo)
                .await
                .map_err(|e| ctx.fail(e))?;
            created(ctx, "wave", wave.id(), &wave)?;
        }
        Command::Project(ProjectCommand::Create(args)) => {
            let project = parents::create_project(&ctx.store, &args)
                .await
                .map_err(|e| ctx.fail(e))?;
            created(ctx, "project session", &project.id, &project)?;
        }
        Command::Task(TaskCommand::Create(args)) => {
            let task = parents::create_task(&ctx.store, &args)
                .await
                .map_err(|e| ctx.fail(e))?;
            created(ctx, "task session", &task.id, &task)?;
        }
        Command::Task(TaskCommand::Body(args)) => record_body(ctx, &args).await?,
        Command::Open(args) => handoffs::open(ctx, args).await?,
        Command::List(args) => handoffs::list(ctx, args).await?,
        Command::Parents(args) => parents::list(ctx, args).await?,
        Command::Prune(args) => handoffs::prune(ctx, args).await?,
        Command::Status { id } => handoffs::status(ctx, &id).await?,
        Command::Complete {
            id,
            summary,
            answer,
        } => {
            let answer = answers::answer_of(ctx, &id, &answer).await?;
            let outcome = InteractiveHandoffOutcome::Completed { summary };
            handoffs::finish(ctx, &id, outcome, answer).await?
        }
        Command::Answer {
            id,
            answer,
            summary,
        } => {
            let (outcome, answer) = answers::completion(ctx, &id, &answer, summary).await?;
            handoffs::finish(ctx, &id, outcome, answer).await?
        }
        Command::Back {
            id,
            summary,
            answer,
        } => {
            let answer = answers::answer_of(ctx, &id, &answer).await?;
            let outcome = InteractiveHandoffOutcome::HandedBack { summary };
            handoffs::finish(ctx, &id, outcome, answer).await?
        }
        Command::Fail { id, reason } => {
            let outcome = InteractiveHandoffOutcome::Failed { reason };
            handoffs::finish(ctx, &id, outcome, None).await?
        }
        Command::ClaimWake {
            id,
            generation,
            require,
        } => handoffs::claim_wake(ctx, &id, generation, require).await?,
        Command::Extend(args) => handoffs::extend(ctx, args).await?,
        Command::Expire => handoffs::expire(ctx).await?,
        Command::History { id } => handoffs::history(ctx, &id).await?,
        Command::Wait { id, timeout } => wait::wait(ctx, &id, timeout).await?,
        Command::Watch(args) => watch::watch(ctx, &args).await?,
        Command::Link(args) => handoffs::link(ctx, args).await?,
        Command::Demo
        | Command::Mcp(_)
        | Command::Attach { .. }
        | Command::Serve(_)
        | Command::Token(_)
        | Command::Hook(_)
        | Command::Completions { .. }
        | Command::Export { .. }
        | Command::Import { .. } => {}
    }
    Ok(())
}

/// `task body`: records the body and prints the parent (JSON), or which
/// generation it is at now.
async fn record_body(ctx: &Context, args: &TaskBodyArgs) -> CliResult<()> {
    let recorded = parents::record_body(&ctx.store, args)
        .await
        .map_err(|e| ctx.fail(e))?;
    if ctx.json {
        return match &recorded.parent {
            Parent::Wave(wave) => emit_json(wave),
            Parent::Project(project) => emit_json(project),
            Parent::Task(task) => emit_json(task),
        };
    }
    let verb = if recorded.changed {
        "recorded"
    } else {
        "already at"
    };
    emit(&format!(
        "{}: {verb} body generation {}\n",
        recorded.parent.reference(),
        recorded.parent.body_generation()
    ))
}

/// Prints a created entity: its JSON, or its id on stdout and a note on
/// stderr.
fn created(
    ctx: &Context,
    what: &str,
    id: &impl std::fmt::Display,
    entity: &impl serde::Serialize,
) -> CliResult<()> {
    if ctx.json {
        return emit_json(entity);
    }
    note(&format!("created {what} {id}"));
    emit(&format!("{id}\n"))
}

/// Reports a clap error: help and version print as usual (exit 0); every
/// usage error becomes one line (`error:`, or JSON with `--json`) and exit 2.
fn usage_error(error: &clap::Error, json: bool) -> ExitCode {
    let help = format!("lf-handoff {}--help", command_path());
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            CliError::usage("a command is required")
                .hint(format!("run `{help}` to see them"))
                .report(json)
        }
        _ => {
            let text = clap_one_line(&error.render().to_string());
            let mut refused = CliError::usage(text.clone());
            // `open`'s attach command is the one argument that must come
            // after `--`: say so where it is missing or came without it.
            let attach_missing = text.contains("<ARGV>")
                || (error.kind() == ErrorKind::UnknownArgument && !text.contains("argument '-"));
            if command_path() == "open " && attach_missing {
                refused = refused.hint(
                    "the attach command goes last, after `--`, as in `lf-handoff open ... -- \
                     tmux attach-session -t SESSION`",
                );
            }
            refused.hint(format!("see `{help}`")).report(json)
        }
    }
}

/// The subcommands named on this process's command line (`open `, `task
/// body `...), for pointing at the right `--help`.
fn command_path() -> String {
    let mut command = Cli::command();
    let mut path = String::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if arg == "--store" || arg == "--config" || arg == "--actor" {
            args.next();
            continue;
        }
        if arg.starts_with('-') {
            continue;
        }
        let Some(sub) = command.find_subcommand(&arg).cloned() else {
            break;
        };
        path.push_str(sub.get_name());
        path.push(' ');
        command = sub;
    }
    path
}

/// Folds clap's multi-line error onto one line: the message and its tips,
/// without the usage block. A line ending in `:` is followed by its list.
fn clap_one_line(rendered: &str) -> String {
    let mut text = String::new();
    let mut listing = false;
    for line in rendered.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("Usage:") || line.starts_with("For more information")
        {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        let item = listing && (line.starts_with('<') || line.starts_with('-'));
        if !text.is_empty() {
            text.push_str(if item && text.ends_with(':') {
                " "
            } else if item {
                ", "
            } else {
                "; "
            });
        }
        listing = item || line.ends_with(':');
        text.push_str(line);
    }
    text
}
