//! The command line grammar (docs/CONTRACT.md, the command line), declared
//! with clap derive, and the parsing of values clap cannot parse on its own.
//!
//! Values are parsed into domain types here (ids, homes, parent
//! references), so a malformed value is a usage error (exit 2) before any
//! store is opened.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use lf_handoff_adapters::parse_duration;
use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    check_env_key, Actor, Choice, InteractiveHandoffParent, InteractiveHandoffStatus, StepKey,
};
use lf_handoff_domain::parent::ParentKind;
use lf_handoff_domain::wave_home::WaveHome;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::answers;
pub use crate::answers::AnswerArgs;
use crate::duration;
use crate::listen::parse_listen;
use crate::mcp::{parse_wait, McpArgs};

/// `lf-handoff`: list, attach and finish the interactive handoffs of an
/// agent orchestrator.
#[derive(Debug, Parser)]
#[command(
    name = "lf-handoff",
    version,
    about = "List, attach and finish the interactive handoffs of an agent orchestrator",
    after_help = "The store is chosen by --store, then LF_HANDOFF_STORE, then the config file \
                  (key store.url), then $LF_HOME/registry.db or the user's data directory.\n\
                  The history names --actor, else LF_HANDOFF_ACTOR, else user@host (pid N).\n\
                  Exit codes: 0 ok, 2 invalid input, 3 not found, 4 conflict, 5 storage unavailable."
)]
pub struct Cli {
    /// The store to use, as a URL such as sqlite:///abs/path/registry.db.
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    /// Read the store URL from this file (key store.url) instead of
    /// $XDG_CONFIG_HOME/lf-handoff/config.toml.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Who you are in the history of the handoffs you change; default:
    /// $LF_HANDOFF_ACTOR, else user@host (pid N).
    #[arg(long, global = true, value_name = "NAME", value_parser = parse_actor)]
    pub actor: Option<Actor>,
    /// For a store served by `lf-handoff serve` (an http:// or https://
    /// URL): the file holding the token; default: $LF_HANDOFF_TOKEN.
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Log what the store does on stderr: -v each store call with its
    /// duration, -vv also the engine's statements and every lost race.
    /// RUST_LOG, when set, says what to log instead.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create waves.
    #[command(subcommand)]
    Wave(WaveCommand),
    /// Create project sessions.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Create task sessions and record their bodies.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Open a handoff for a parent (or get back its active one, or with
    /// --step its handoff for that step).
    Open(OpenArgs),
    /// List handoffs, oldest first (or --newest-first); the filters given
    /// are and-ed.
    List(ListArgs),
    /// List parents (waves, project sessions, task sessions) in id order;
    /// the filters given are and-ed.
    Parents(ParentsArgs),
    /// Show one handoff.
    Status {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
    },
    /// Record that you attach, then run the handoff's command in its
    /// directory with its environment, when its program is allowed (the
    /// config file's attach.allow_programs, default tmux, and
    /// --allow-program).
    Attach {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        /// Record the attach and print what to run instead of running it.
        #[arg(long)]
        print: bool,
        /// Also run this program (the command's first word, compared as
        /// written: tmux is not /tmp/x/tmux); repeatable.
        #[arg(long = "allow-program", value_name = "PROGRAM")]
        allow_program: Vec<String>,
    },
    /// Finish a handoff: the work is done. A handoff that asks with
    /// choices or a form needs an answer (--choice, --set or --answer-json).
    Complete {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        /// What was done.
        #[arg(long)]
        summary: String,
        #[command(flatten)]
        answer: AnswerArgs,
    },
    /// Answer a handoff that asks with choices or a form, and so complete
    /// it: `answer ID --choice allow`, `answer ID --set budget=300`.
    Answer {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        #[command(flatten)]
        answer: AnswerArgs,
        /// What was done (default: "answered" and the answer).
        #[arg(long)]
        summary: Option<String>,
    },
    /// Finish a handoff: hand the work back to the agent (with an answer,
    /// optionally, when it asks for one).
    Back {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        /// What the agent should continue from.
        #[arg(long)]
        summary: String,
        #[command(flatten)]
        answer: AnswerArgs,
    },
    /// Finish a handoff: the work could not be done.
    Fail {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        /// Why.
        #[arg(long)]
        reason: String,
    },
    /// Claim the wake of a finished handoff for a body generation (exit 0
    /// whether or not it wins; `claimed` says which).
    ClaimWake {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        /// The claiming body's generation.
        #[arg(long, value_name = "G")]
        generation: u32,
        /// Exit 4 (kind not_claimed) when this generation did not get the
        /// wake, so a script can branch on the exit code alone.
        #[arg(long)]
        require: bool,
    },
    /// Move the deadline of an active handoff (or give it one).
    Extend(ExtendArgs),
    /// Expire every handoff whose deadline has passed, and print them.
    Expire,
    /// Remove the finished handoffs whose wake was claimed, finished before
    /// a cutoff, with their history; print how many.
    ///
    /// Never removes an active handoff or one whose wake is unclaimed.
    Prune(PruneArgs),
    /// Show every change of a handoff, oldest first, with who made it.
    History {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
    },
    /// Block until a handoff is finished or expired, then print it (exit 4
    /// on timeout).
    ///
    /// A handoff whose deadline passes while waiting is expired then and
    /// printed like a finished one (exit 0; its status says `expired`).
    Wait {
        /// The handoff id (ih_...).
        id: InteractiveHandoffId,
        /// Give up after this long (500ms, 30s, 2m, 1h, 1m30s); default: never.
        #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
        timeout: Option<Duration>,
    },
    /// Print history events as they happen, one per line, and optionally
    /// run a program for each (C16).
    ///
    /// Without --from it starts with the events from now on; every line
    /// carries the event's position, and --from POS resumes after it
    /// (--from 0: the whole history first). With --json each line is one
    /// JSON object.
    Watch(WatchArgs),
    /// Write the whole registry (parents, task PRs, handoffs, events) as
    /// versioned JSON lines, to stdout or --output FILE.
    ///
    /// The export is one consistent snapshot, taken while others go on
    /// writing. `import` loads it into an empty store of any backend.
    Export {
        /// Write to FILE (created mode 0600, in full or not at all) instead
        /// of stdout; an existing FILE is refused unless --force.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Replace an existing --output FILE.
        #[arg(long, requires = "output")]
        force: bool,
    },
    /// Load an export into an empty store, all of it or nothing, from stdin
    /// or --input FILE.
    Import {
        /// Read the export from FILE instead of stdin.
        #[arg(long, value_name = "FILE")]
        input: Option<PathBuf>,
    },
    /// Narrate a full handoff lifecycle on a throwaway SQLite store (or on
    /// the store given with --store).
    Demo,
    /// Print a shell completion script.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Serve the store over HTTP until SIGTERM (docs/API.md).
    ///
    /// Without --tokens it makes a token of every scope for this run only
    /// and prints them; a non-loopback --listen needs --tokens, and TLS
    /// (--tls-cert, --tls-key) unless --behind-proxy. SIGHUP re-reads the
    /// tokens file.
    Serve(ServeArgs),
    /// Make, list and revoke the tokens of `serve --tokens FILE`.
    #[command(subcommand)]
    Token(TokenCommand),
    Hook(crate::hook::HookArgs),
    /// Print a signed link where a person sees and answers a handoff in a
    /// browser without signing in (served by `serve`; docs/API.md).
    Link(LinkArgs),
    /// Serve the Model Context Protocol over standard input and output,
    /// for an agent's MCP client that starts it (docs/MCP.md): the tools
    /// ask_person, await_answer, get_handoff and list_waiting.
    Mcp(McpArgs),
}

/// `link`
#[derive(Debug, Args)]
pub struct LinkArgs {
    /// The handoff id (ih_...).
    pub id: InteractiveHandoffId,
    /// Who the link is for: what its holder does is recorded as
    /// `link:NAME`. Signed here with --link-secret: default `person`.
    /// Through a service: the token's name, the only one it may give.
    #[arg(long = "for", value_name = "NAME")]
    pub holder: Option<String>,
    /// How long the link works (90s, 15m, 2h, 1d). Default: until the
    /// handoff's deadline, or a day when it has none.
    #[arg(long = "valid-for", value_name = "DURATION", value_parser = parse_span)]
    pub valid_for: Option<std::time::Duration>,
    /// The link secret of the `serve` that will answer the link (its
    /// --link-secret, or `link-secret` beside its tokens file). Not needed
    /// with an http:// or https:// store: the service makes the link.
    #[arg(
        long = "link-secret",
        value_name = "FILE",
        env = "LF_HANDOFF_LINK_SECRET",
        requires = "public_url"
    )]
    pub link_secret: Option<PathBuf>,
    /// The URL people reach that `serve` at (its --public-url); with
    /// --link-secret.
    #[arg(
        long = "public-url",
        value_name = "URL",
        env = "LF_HANDOFF_PUBLIC_URL",
        requires = "link_secret"
    )]
    pub public_url: Option<String>,
}

/// `serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on: IP:PORT, or localhost:PORT.
    #[arg(long, value_name = "ADDR", default_value = lf_handoff_server::DEFAULT_LISTEN, value_parser = parse_listen)]
    pub listen: std::net::SocketAddr,
    /// The tokens file (`lf-handoff token create` makes it).
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// The TLS certificate chain (PEM).
    #[arg(long = "tls-cert", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long = "tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A proxy in front terminates TLS: allow plain HTTP on a non-loopback
    /// address.
    #[arg(long = "behind-proxy")]
    pub behind_proxy: bool,
    /// The largest JSON request body, in bytes.
    #[arg(long = "max-body", value_name = "BYTES", default_value_t = 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    pub max_body: u64,
    /// The largest import body, in bytes.
    #[arg(long = "max-import-body", value_name = "BYTES", default_value_t = 1 << 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_import_body: u64,
    /// How long a client has to send a request's whole head, from the
    /// connection's start or the previous answer (also how long an idle
    /// connection stays open).
    #[arg(long = "header-timeout", value_name = "DURATION", default_value = "5s", value_parser = parse_span)]
    pub header_timeout: Duration,
    /// How long a request's whole body may take to arrive (an import's,
    /// each piece of it).
    #[arg(long = "body-timeout", value_name = "DURATION", default_value = "30s", value_parser = parse_span)]
    pub body_timeout: Duration,
    /// How many connections are served at once.
    #[arg(long = "max-connections", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// How many connections one peer address may hold (an IPv6 peer: its
    /// /64). Default: an eighth of --max-connections, at least 4.
    #[arg(long = "max-connections-per-peer", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_peer: Option<u64>,
    /// How long a tool call of /mcp (ask_person, await_answer) waits for
    /// a person's answer before it answers that the question still waits
    /// (at most 5m; keep it below the agents' tool-call timeouts).
    #[arg(long = "mcp-wait", value_name = "DURATION", default_value = "45s", value_parser = parse_wait)]
    pub mcp_wait: Duration,
    /// How many event streams and long polls are open at once.
    #[arg(long = "max-streams", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_streams: u64,
    /// The file holding the secret that signs the person's links and
    /// sign-ins (created, mode 0600, when missing; replace it and send
    /// SIGHUP to invalidate every link and sign-in). Default: `link-secret` beside the tokens file; without
    /// a tokens file, a secret of this run only.
    #[arg(long = "link-secret", value_name = "FILE")]
    pub link_secret: Option<PathBuf>,
    /// The URL people reach the service at, which links start with (e.g.
    /// a proxy's https://handoffs.example). Default: the address it
    /// listens on.
    #[arg(long = "public-url", value_name = "URL")]
    pub public_url: Option<String>,
    /// Post a JSON message to this URL (a Slack or Mattermost incoming
    /// webhook shows its `text`) for each opened handoff, each finish and
    /// each deadline coming near (repeatable). `URL#for=NAME` names who
    /// the messages' links act as (`link:NAME`; default `notification`).
    #[arg(long, value_name = "URL")]
    pub notify: Vec<String>,
    /// A file holding a shared secret: each message carries its
    /// HMAC-SHA256 in the X-LF-Handoff-Signature header.
    #[arg(long = "notify-secret-file", value_name = "FILE", requires = "notify")]
    pub notify_secret_file: Option<PathBuf>,
    /// How long before a deadline its reminder is posted.
    #[arg(long = "notify-before", value_name = "DURATION", default_value = "15m", value_parser = parse_span)]
    pub notify_before: Duration,
    /// How long a server's hold on an endpoint's deliveries lasts
    /// unrenewed: after a crash, how soon another server (or the restarted
    /// one) takes over.
    #[arg(long = "notify-lease", value_name = "DURATION", default_value = "30s", value_parser = parse_span)]
    pub notify_lease: Duration,
    /// How many times a message is posted before it is dropped (logged
    /// and counted in /metrics).
    #[arg(long = "notify-attempts", value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub notify_attempts: u32,
}

/// `token ...`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token, store its hash in the tokens file and print it (once).
    Create {
        /// Its name: the actor of every change made with it.
        name: String,
        /// What it may do (repeatable): agent, person or operator.
        #[arg(long, value_name = "SCOPE", required = true, value_parser = parse_scope)]
        scope: Vec<lf_handoff_api::Scope>,
        /// The tokens file (created, mode 0600, when missing).
        #[arg(long, value_name = "FILE")]
        tokens: PathBuf,
    },
    /// List the tokens of a tokens file (names, scopes, when made).
    List {
        /// The tokens file.
        #[arg(long, value_name = "FILE")]
        tokens: PathBuf,
    },
    /// Revoke a token: remove it from the tokens file (a running serve
    /// drops it on SIGHUP).
    Revoke {
        /// The token's name.
        name: String,
        /// The tokens file.
        #[arg(long, value_name = "FILE")]
        tokens: PathBuf,
    },
}

/// Parses a token scope: agent, person or operator.
fn parse_scope(text: &str) -> Result<lf_handoff_api::Scope, String> {
    lf_handoff_api::Scope::parse(text.trim())
        .ok_or_else(|| format!("{text:?} is not a scope: use agent, person or operator"))
}

/// `wave ...`
#[derive(Debug, Subcommand)]
pub enum WaveCommand {
    /// Create a wave and print its id.
    Create {
        /// The wave's name.
        #[arg(long)]
        name: String,
        /// The repository it works on (stored as given).
        #[arg(long, value_name = "PATH")]
        repo: String,
    },
}

/// `project ...`
#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project session under a wave and print its id.
    Create(ProjectCreateArgs),
}

/// The body a new project or task session records: `--provider`,
/// `--provider-session`, `--generation`.
#[derive(Debug, Args)]
pub struct SessionBodyArgs {
    /// The model provider its bodies use.
    #[arg(long, value_name = "P")]
    pub provider: String,
    /// The provider's conversation id, when it keeps one.
    #[arg(long = "provider-session", value_name = "S")]
    pub provider_session: Option<String>,
    /// The generation of its current body.
    #[arg(long, value_name = "G")]
    pub generation: u32,
}

/// `project create`
#[derive(Debug, Args)]
pub struct ProjectCreateArgs {
    /// The owning wave (wv_...).
    #[arg(long, value_name = "ID", value_parser = parse_wave_id)]
    pub wave: WaveId,
    /// The project's name.
    #[arg(long)]
    pub name: String,
    /// Its current body.
    #[command(flatten)]
    pub body: SessionBodyArgs,
}

/// `task ...`
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Create a task session under a project session and print its id.
    Create(TaskCreateArgs),
    /// Record a new body process for a task (or any parent).
    Body(TaskBodyArgs),
}

/// `task create`
#[derive(Debug, Args)]
pub struct TaskCreateArgs {
    /// The owning project session (ps_...).
    #[arg(long, value_name = "ID", value_parser = parse_project_id)]
    pub project: ProjectSessionId,
    /// The task's git worktree (absolute); its handoffs run there.
    #[arg(long, value_name = "PATH")]
    pub worktree: PathBuf,
    /// Its current body.
    #[command(flatten)]
    pub body: SessionBodyArgs,
    /// The issue identifier, such as W2-175.
    #[arg(long, value_name = "W2-175")]
    pub identifier: Option<String>,
    /// The issue title.
    #[arg(long, value_name = "T")]
    pub title: Option<String>,
}

/// `task body`
#[derive(Debug, Args)]
pub struct TaskBodyArgs {
    /// The task (ts_... or task:ts_...); wave:ID and project:ID work too.
    #[arg(value_name = "ID", value_parser = parse_parent)]
    pub parent: InteractiveHandoffParent,
    /// The new body's generation (higher than the current one).
    #[arg(long, value_name = "G")]
    pub generation: u32,
    /// The new body's provider; default: the parent's.
    #[arg(long, value_name = "P")]
    pub provider: Option<String>,
    /// The new body's provider conversation; default: the parent's.
    #[arg(long = "provider-session", value_name = "S")]
    pub provider_session: Option<String>,
}

/// `open`
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// The waiting parent: wave:ID, project:ID or task:ID.
    #[arg(long, value_name = "REF", value_parser = parse_parent)]
    pub parent: InteractiveHandoffParent,
    /// Where the work runs: user@local, or ssh://user@host[:port].
    #[arg(long, value_name = "HOME", value_parser = parse_home)]
    pub home: WaveHome,
    /// The absolute directory to attach in (a task's worktree).
    #[arg(long, value_name = "PATH")]
    pub cwd: PathBuf,
    /// The model provider (the parent's).
    #[arg(long, value_name = "P")]
    pub provider: String,
    /// The provider's conversation id (the parent's, when it has one).
    #[arg(long = "provider-session", value_name = "S")]
    pub provider_session: Option<String>,
    /// The generation of the body opening the handoff.
    #[arg(long, value_name = "G")]
    pub generation: u32,
    /// Why a person is needed.
    #[arg(long, value_name = "R")]
    pub reason: String,
    /// The body's name for the step it is at, such as oauth-login@turn-17:
    /// a body that runs the step again (a replaced one too) gets the same
    /// handoff back, even after it finished.
    #[arg(long, value_name = "KEY", value_parser = parse_step)]
    pub step: Option<StepKey>,
    /// Give the handoff a deadline this long from now (90s, 15m, 2h, 1d,
    /// 2w, 1h30m): unless finished by then, it expires.
    #[arg(long = "expires-in", value_name = "DURATION", value_parser = parse_span, conflicts_with = "expires_at")]
    pub expires_in: Option<std::time::Duration>,
    /// Give the handoff a deadline at this time (RFC 3339, such as
    /// 2026-12-03T18:00:00Z): unless finished by then, it expires.
    #[arg(long = "expires-at", value_name = "TIME", value_parser = parse_rfc3339)]
    pub expires_at: Option<OffsetDateTime>,
    /// Environment to add when attaching (repeatable); names that change
    /// how programs load or start (LD_*, BASH_ENV, PATH, ...) are refused.
    #[arg(long = "env", value_name = "K=V", value_parser = parse_env_pair)]
    pub env: Vec<(String, String)>,
    /// Ask a person to pick one of 2 to 10 choices, comma-separated, each
    /// VALUE or VALUE=Label (a value is letters, digits and . _ : @ -):
    /// --choices allow,deny or --choices 'a=Plan A,b=Plan B'.
    #[arg(long, value_name = "CHOICES", value_delimiter = ',', value_parser = answers::parse_choice, conflicts_with = "form")]
    pub choices: Vec<Choice>,
    /// Ask a person to fill in a form: a JSON file holding a flat JSON
    /// Schema object (string, integer, number and boolean properties;
    /// `-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub form: Option<PathBuf>,
    /// The answer the handoff ends with at its deadline, so the agent can
    /// tell it from a person's: a choice's value, or JSON for a form.
    #[arg(long = "on-expiry", value_name = "VALUE|JSON")]
    pub on_expiry: Option<String>,
    /// The attach command, after `--`; it is run without a shell.
    #[arg(last = true, required = true, value_name = "ARGV")]
    pub argv: Vec<String>,
}

/// `watch`
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only the events of this parent's handoffs (wave:ID, project:ID or
    /// task:ID).
    #[arg(long, value_name = "REF", value_parser = parse_parent)]
    pub parent: Option<InteractiveHandoffParent>,
    /// Start after this position (a position a line printed; 0 for the
    /// whole history); default: from now on.
    #[arg(long, value_name = "POS")]
    pub from: Option<u64>,
    /// Stop after this many events.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Run PROG ARGS... for every event (no shell), the event as one JSON
    /// line on its standard input; a failure is reported and watching goes
    /// on. Everything after --exec is the program and its arguments.
    #[arg(
        long,
        value_name = "PROG",
        num_args = 1..,
        allow_hyphen_values = true,
        trailing_var_arg = true
    )]
    pub exec: Vec<std::ffi::OsString>,
}

/// `list`
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this parent's own handoffs (wave:ID, project:ID or task:ID):
    /// a wave's are those opened for the wave itself, not for its projects
    /// and tasks (`parents --wave ID` lists those).
    #[arg(long, value_name = "REF", value_parser = parse_parent)]
    pub parent: Option<InteractiveHandoffParent>,
    /// Only handoffs that are not finished.
    #[arg(long)]
    pub active: bool,
    /// Only handoffs in this status (repeatable: in any of them): waiting,
    /// attached, completed, handed_back, failed or expired.
    #[arg(long, value_name = "STATUS", value_parser = parse_status)]
    pub status: Vec<InteractiveHandoffStatus>,
    /// Only handoffs whose work runs at this home: user@local, or
    /// ssh://user@host[:port].
    #[arg(long, value_name = "HOME", value_parser = parse_home)]
    pub home: Option<WaveHome>,
    /// Only handoffs created more than this long ago (90s, 15m, 2h, 1d, 2w,
    /// 1h30m).
    #[arg(long = "older-than", value_name = "DURATION", value_parser = parse_span)]
    pub older_than: Option<std::time::Duration>,
    /// Only handoffs due within this long: active, their deadline at or
    /// before now plus this (15m, 1h, 1d; an overdue one is due within any).
    #[arg(long = "due-within", value_name = "DURATION", value_parser = parse_span)]
    pub due_within: Option<std::time::Duration>,
    /// At most this many, the first in list order (a page).
    #[arg(long, value_name = "N", value_parser = parse_limit)]
    pub limit: Option<usize>,
    /// Start after this handoff: the last id of the previous page.
    #[arg(long, value_name = "ID")]
    pub after: Option<InteractiveHandoffId>,
    /// Newest first: `--limit` keeps the newest, `--after` pages towards
    /// older handoffs.
    #[arg(long)]
    pub newest_first: bool,
}

/// `parents`
#[derive(Debug, Args)]
pub struct ParentsArgs {
    /// Only parents of this kind: wave, project or task.
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    pub kind: Option<ParentKind>,
    /// Only this wave's parents: the wave, its projects and their tasks.
    #[arg(long, value_name = "ID", value_parser = parse_wave_id)]
    pub wave: Option<WaveId>,
    /// Only this project's parents: the project and its tasks.
    #[arg(long, value_name = "ID", value_parser = parse_project_id)]
    pub project: Option<ProjectSessionId>,
    /// At most this many, the first in id order (a page).
    #[arg(long, value_name = "N", value_parser = parse_limit)]
    pub limit: Option<usize>,
    /// Start after this parent: the last id of the previous page.
    #[arg(long, value_name = "ID", value_parser = parse_parent)]
    pub after: Option<InteractiveHandoffParent>,
}

/// `prune`
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove those finished before this: a duration ago (30d, 2w, 12h,
    /// 1d12h) or an RFC 3339 time (2026-11-01T00:00:00Z), not in the future.
    #[arg(long = "finished-before", value_name = "DURATION|DATE", value_parser = parse_cutoff)]
    pub finished_before: Cutoff,
    /// Count what would be removed, and remove nothing.
    #[arg(long = "dry-run")]
    pub dry_run: bool,
}

/// The cutoff of `prune --finished-before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cutoff {
    /// This long before now.
    Ago(std::time::Duration),
    /// This instant.
    At(OffsetDateTime),
}

/// `extend`
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The handoff id (ih_...).
    pub id: InteractiveHandoffId,
    /// The new deadline is this long from now (not from the old deadline),
    /// so running the command twice gives the same deadline: 90s, 15m, 2h,
    /// 1d, 2w, 1h30m.
    #[arg(long, value_name = "DURATION", value_parser = parse_span, required_unless_present = "until", conflicts_with = "until")]
    pub by: Option<std::time::Duration>,
    /// The new deadline, in RFC 3339 (such as 2026-12-03T18:00:00Z).
    #[arg(long, value_name = "TIME", value_parser = parse_rfc3339)]
    pub until: Option<OffsetDateTime>,
}

/// Parses a parent reference: `wave:ID`, `project:ID`, `task:ID`, or a bare
/// prefixed id (`wv_...`, `ps_...`, `ts_...`).
pub fn parse_parent(text: &str) -> Result<InteractiveHandoffParent, String> {
    match text.contains(':') {
        true => InteractiveHandoffParent::parse(text),
        false => InteractiveHandoffParent::parse_id(text),
    }
    .map_err(|e| e.to_string())
}

/// Parses a wave id, written `wv_...` or `wave:wv_...`.
fn parse_wave_id(text: &str) -> Result<WaveId, String> {
    let bare = text.strip_prefix("wave:").unwrap_or(text);
    WaveId::parse(bare).map_err(|e| e.to_string())
}

/// Parses a project session id, written `ps_...` or `project:ps_...`.
fn parse_project_id(text: &str) -> Result<ProjectSessionId, String> {
    let bare = text.strip_prefix("project:").unwrap_or(text);
    ProjectSessionId::parse(bare).map_err(|e| e.to_string())
}

fn parse_kind(text: &str) -> Result<ParentKind, String> {
    ParentKind::parse(text).map_err(|e| e.to_string())
}

fn parse_step(text: &str) -> Result<StepKey, String> {
    StepKey::parse(text).map_err(|e| e.to_string())
}

fn parse_home(text: &str) -> Result<WaveHome, String> {
    WaveHome::parse(text).map_err(|e| e.to_string())
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| match e {
        lf_handoff_adapters::StoreError::InvalidInput(message) => message,
        other => other.to_string(),
    })
}

/// Parses a deadline duration (`90s`, `1h30m`, ... see [`duration`]).
pub fn parse_span(text: &str) -> Result<std::time::Duration, String> {
    duration::parse(text).map_err(|e| e.to_string())
}

/// Parses an RFC 3339 time, such as `2026-12-03T18:00:00Z`.
pub fn parse_rfc3339(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time such as 2026-12-03T18:00:00Z ({e})"))
}

/// Parses a status by its name in JSON and storage (`handed_back`).
pub fn parse_status(text: &str) -> Result<InteractiveHandoffStatus, String> {
    InteractiveHandoffStatus::parse(text.trim()).ok_or_else(|| {
        let names: Vec<&str> = InteractiveHandoffStatus::ALL
            .iter()
            .map(|status| status.as_str())
            .collect();
        format!("{text:?} is not a status: use {}", names.join(", "))
    })
}

/// Parses a page size: a whole number, at least 1.
fn parse_limit(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("--limit 0 lists nothing: give at least 1".into()),
        Ok(limit) => Ok(limit),
        Err(_) => Err(format!("{text:?} is not a number of rows")),
    }
}

/// Parses a prune cutoff: a duration (see [`duration`]), else an RFC 3339
/// time.
pub fn parse_cutoff(text: &str) -> Result<Cutoff, String> {
    let looks_like_time = text.contains('-') || text.contains(':');
    match (duration::parse(text), parse_rfc3339(text)) {
        (Ok(span), _) => Ok(Cutoff::Ago(span)),
        (_, Ok(at)) => Ok(Cutoff::At(at)),
        (Err(_), Err(time)) if looks_like_time => Err(time),
        (Err(span), Err(_)) => Err(format!(
            "{span}; or give an RFC 3339 time such as 2026-11-01T00:00:00Z"
        )),
    }
}

/// Parses an actor name (`--actor`, `LF_HANDOFF_ACTOR`).
pub fn parse_actor(text: &str) -> Result<Actor, String> {
    Actor::parse(text).map_err(|e| e.to_string())
}

/// Parses one `--env K=V` pair; the key must not be blank.
fn parse_env_pair(text: &str) -> Result<(String, String), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("{text:?} must be KEY=VALUE"));
    };
    check_env_key(key).map_err(|e| e.to_string())?;
    Ok((key.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    //! Bad input, property-tested: the command line's own parsers never
    //! panic, and refuse or return a value that prints back to its input.

    use lf_handoff_domain::interactive_handoff::check_env_key;
    use proptest::prelude::*;

    use super::*;

    /// Arbitrary text, or text shaped like `K=V` with odd keys and values.
    fn pair_like() -> impl Strategy<Value = String> {
        let near = (
            prop_oneof![
                Just(String::new()),
                Just(" ".to_string()),
                "[A-Za-z_][A-Za-z0-9_]{0,8}",
                any::<String>(),
            ],
            prop::sample::select(vec!["=", "==", "", " = "]),
            prop_oneof![
                Just(String::new()),
                Just("a=b=c".to_string()),
                Just("$(id); `x` 'q' \"d\"".to_string()),
                any::<String>(),
            ],
        )
            .prop_map(|(key, separator, value)| format!("{key}{separator}{value}"));
        prop_oneof![any::<String>(), near]
    }

    /// Arbitrary text, or a parent reference, or a bare prefixed id.
    fn parent_like() -> impl Strategy<Value = String> {
        let uuid = any::<u128>().prop_map(|n| {
            let hex = format!("{n:032x}");
            format!(
                "{}-{}-{}-{}-{}",
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..]
            )
        });
        let near = (
            prop::sample::select(vec!["wave:", "project:", "task:", "", "ship:", "wave::"]),
            prop::sample::select(vec!["wv_", "ps_", "ts_", "ih_", "pr_", ""]),
            uuid,
        )
            .prop_map(|(kind, prefix, uuid)| format!("{kind}{prefix}{uuid}"));
        prop_oneof![any::<String>(), near]
    }

    #[test]
    fn statuses_limits_and_cutoffs_parse_or_say_what_is_wrong() {
        assert_eq!(
            parse_status("handed_back"),
            Ok(InteractiveHandoffStatus::HandedBack)
        );
        let error = parse_status("done").unwrap_err();
        assert!(error.contains("waiting, attached, completed"), "{error}");
        assert_eq!(parse_limit("25"), Ok(25));
        assert!(parse_limit("0").is_err());
        assert!(parse_limit("ten").is_err());
        assert_eq!(
            parse_cutoff("30d"),
            Ok(Cutoff::Ago(Duration::from_secs(30 * 86_400)))
        );
        assert_eq!(
            parse_cutoff("2026-11-01T00:00:00+01:00"),
            Ok(Cutoff::At(time::macros::datetime!(2026-10-31 23:00:00 UTC)))
        );
        // A duration's error for what looks like one, a time's otherwise.
        assert!(parse_cutoff("30x").unwrap_err().contains("unit"));
        assert!(parse_cutoff("2026-11-01").unwrap_err().contains("RFC 3339"));
        assert!(parse_cutoff("0s").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn env_pairs_split_at_the_first_equals_sign_or_refuse(text in pair_like()) {
            match parse_env_pair(&text) {
                Ok((key, value)) => {
                    prop_assert_eq!(format!("{key}={value}"), text.clone());
                    prop_assert!(check_env_key(&key).is_ok());
                    prop_assert!(!key.contains('='));
                }
                Err(message) => {
                    let refused_key = text
                        .split_once('=')
                        .map(|(key, _)| check_env_key(key).is_err());
                    prop_assert!(refused_key.unwrap_or(true), "{text:?}: {message}");
                }
            }
        }

        #[test]
        fn parents_round_trip_or_refuse(text in parent_like()) {
            if let Ok(parent) = parse_parent(&text) {
                prop_assert_eq!(parse_parent(&parent.to_string()).unwrap(), parent.clone());
                let bare = parent.id_str().to_string();
                prop_assert_eq!(parse_parent(&bare).unwrap(), parent.clone());
                prop_assert!(
                    text.to_ascii_lowercase() == parent.to_string() || text.to_ascii_lowercase() == bare
                );
            }
        }

        #[test]
        fn timeouts_round_trip_through_milliseconds(text in any::<String>(), millis in any::<u64>()) {
            if let Ok(duration) = parse_timeout(&text) {
                let shown = format!("{}ms", duration.as_millis());
                prop_assert_eq!(parse_timeout(&shown).unwrap(), duration);
            }
            prop_assert_eq!(
                parse_timeout(&format!("{millis}ms")).unwrap(),
                Duration::from_millis(millis)
            );
        }

        #[test]
        fn ids_and_homes_given_on_the_command_line_round_trip_or_refuse(text in parent_like()) {
            if let Ok(wave) = parse_wave_id(&text) {
                prop_assert_eq!(parse_wave_id(wave.as_str()).unwrap(), wave);
            }
            if let Ok(project) = parse_project_id(&text) {
                prop_assert_eq!(parse_project_id(project.as_str()).unwrap(), project);
            }
            if let Ok(home) = parse_home(&text) {
                prop_assert_eq!(parse_home(&home.to_string()).unwrap(), home);
            }
        }
    }
}
