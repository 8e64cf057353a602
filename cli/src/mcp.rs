//! `lf-handoff mcp`: the Model Context Protocol over standard input and
//! output (C28), for an agent's MCP client that starts this process.
//! Standard output carries the protocol alone; logs go to stderr.

use std::time::Duration;

use clap::Args;
use lf_handoff_adapters::StorageConfig;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_mcp::{serve_stdio, McpServer, ParentChoice, Place, Settings};

use crate::context::Context;
use crate::error::{CliError, CliResult};

/// Serves the tools on `ctx`'s store until the client closes standard
/// input. Without `--parent` the questions go under this client's own
/// wave, identified by the account, the machine and the directory.
///
/// # Errors
/// Exit 5 when the session cannot start or its transport fails.
pub async fn serve(ctx: Context, config: &StorageConfig, args: McpArgs) -> CliResult<()> {
    let place = Place::this_process();
    let parent = match args.parent {
        Some(parent) => ParentChoice::Named(parent),
        None => {
            let host = host_name();
            let cwd = place.cwd.display().to_string();
            let key = format!("stdio:{}@{host}:{cwd}", place.home.user());
            let name = format!("mcp: {}@{host} in {cwd}", place.home.user());
            ParentChoice::session_wave(&key, &name, &cwd)
        }
    };
    let inbox = args.public_url.or_else(|| match config {
        StorageConfig::Http(http) => Some(http.base.clone()),
        _ => None,
    });
    let settings = Settings {
        wait: args.wait,
        parent,
        place,
        inbox,
    };
    serve_stdio(McpServer::new(ctx.store, settings))
        .await
        .map_err(CliError::from)
}

/// This machine's name (`/etc/hostname`, else `HOSTNAME`, else `localhost`).
fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// `mcp`
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The parent the questions go under (wave:ID, project:ID or task:ID),
    /// asked as its current body. Default: a wave of this client's own,
    /// made at its first question, the same for the same account,
    /// machine and directory.
    #[arg(long, value_name = "PARENT", env = "LF_HANDOFF_PARENT")]
    pub parent: Option<InteractiveHandoffParent>,
    /// How long ask_person and await_answer wait for an answer before
    /// they return that the question still waits (at most 5m; keep it
    /// below the client's tool-call timeout; 0s answers at once).
    #[arg(long, value_name = "DURATION", default_value = "45s", value_parser = parse_wait)]
    pub wait: Duration,
    /// The URL people reach `serve` at: a waiting question's link is its
    /// page there (`URL/inbox/ID`). Default: the service of an http:// or
    /// https:// store; none for a local store.
    #[arg(long = "public-url", value_name = "URL", env = "LF_HANDOFF_PUBLIC_URL")]
    pub public_url: Option<String>,
}

/// Parses `mcp --wait` and `serve --mcp-wait`: a duration of at most
/// five minutes (`45s`, `500ms`; `0s` answers at once with where the
/// question stands).
pub fn parse_wait(text: &str) -> Result<Duration, String> {
    let span = crate::duration::parse_as(text, &crate::duration::SETTING)
        .map_err(|e| e.message(&crate::duration::SETTING))?;
    if span > Duration::from_secs(300) {
        return Err(format!("{text} is longer than 5m, the longest wait"));
    }
    Ok(span)
}
