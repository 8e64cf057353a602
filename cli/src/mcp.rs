//! `lf-handoff mcp`: the Model Context Protocol over standard input and
//! output (C28), for an agent's MCP client that starts this process.
//! Standard output carries the protocol alone; logs go to stderr.

use lf_handoff_adapters::StorageConfig;
use lf_handoff_mcp::{serve_stdio, McpServer, ParentChoice, Place, Settings};

use crate::args::McpArgs;
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
