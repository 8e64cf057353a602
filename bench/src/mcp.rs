//! `ask_person` over standard input and output against the library's
//! `open` and `wait` (C28's goal: at most 5 ms more, median).
//!
//! One store of the backend; an `lf-handoff mcp --wait 0s` process on it,
//! driven as an agent's MCP client drives it (newline-delimited JSON-RPC
//! on its standard input and output, after the protocol's handshake), and
//! the library in this process. Each sample asks a new question: through
//! the server, a `tools/call` of `ask_person` until its answer is read
//! (the server reads the parent, opens the handoff and reads it once);
//! through the library, `open_interactive_handoff` and a `wait` of zero
//! (one read). The sides take turns sample by sample. Between samples,
//! untimed, each question is failed, so its parent may ask again (one
//! question waits per parent). The difference of the medians is what the
//! protocol, the pipe and the server's own work add to a question; the
//! person's answer reaches both sides by the same wait.
//!
//! Not on sled, which lets one process hold a store at a time: this
//! process fails each question between samples while the server holds
//! the store.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, Store};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoffOutcome, InteractiveHandoffParent, OpenInteractiveHandoff, OpenOptions,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use serde::Serialize;
use serde_json::{json, Value};

use crate::backends::BenchBackend;
use crate::error::{BenchResult, Context, Failure};
use crate::stats::Summary;

/// The goal: `ask_person` over stdio at most this many ms over the
/// library's open + wait, median.
pub const EXTRA_GOAL_MS: f64 = 5.0;

/// Untimed samples on each side before the timed ones.
const WARM_UP: usize = 10;

/// The figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct McpFigures {
    /// `ask_person` over standard input and output, whole calls.
    pub ask_person: Summary,
    /// The library's `open` and `wait` (zero: one read).
    pub library: Summary,
    /// Median `ask_person` minus median `open` + `wait`, ms (goal: at most
    /// 5).
    pub extra_median_ms: f64,
}

/// Measures `samples` questions per side.
///
/// # Errors
/// When the store or the server cannot be started, or a call fails.
pub async fn measure(
    backend: &dyn BenchBackend,
    cli: &Path,
    scratch: &Path,
    samples: usize,
) -> BenchResult<McpFigures> {
    let config = backend.new_store("mcp").await?;
    let store = open_store(&config).await.context("open the store")?;
    let wave = Wave::new(
        WaveId::from_uuid(uuid::Uuid::now_v7()),
        "mcp bench".into(),
        "/bench".into(),
    );
    store.create_wave(&wave).await.context("create the wave")?;
    let mut server = Server::start(cli, &config.url(), scratch)?;
    let mut asked = Vec::new();
    let mut opened = Vec::new();
    for sample in 0..samples + WARM_UP {
        let question = format!("May I go on? (sample {sample})");
        let server_first = sample % 2 == 0;
        let mut times = [Duration::ZERO; 2];
        for side in if server_first { [0, 1] } else { [1, 0] } {
            let (took, id) = if side == 0 {
                server.ask(&question)?
            } else {
                library_ask(&store, &wave, &question).await?
            };
            times[side] = took;
            let outcome = InteractiveHandoffOutcome::Failed {
                reason: "benchmark".into(),
            };
            store
                .finish_interactive_handoff(&id, &outcome, None)
                .await
                .context("fail the question")?;
        }
        if sample >= WARM_UP {
            asked.push(times[0]);
            opened.push(times[1]);
        }
    }
    server.stop();
    drop(store);
    backend.remove(&config).await;
    let ask_person = Summary::of(&asked);
    let library = Summary::of(&opened);
    Ok(McpFigures {
        extra_median_ms: (ask_person.median_us - library.median_us) / 1000.0,
        ask_person,
        library,
    })
}

/// One question through the library: `open`, then a `wait` of zero.
async fn library_ask(
    store: &Store,
    wave: &Wave,
    question: &str,
) -> BenchResult<(Duration, InteractiveHandoffId)> {
    let request = OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Wave(wave.id().clone()),
        home: WaveHome::Local {
            user: "bench".into(),
        },
        cwd: "/bench".into(),
        provider: "mcp".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: question.to_string(),
        environment: Default::default(),
        attach_argv: vec!["echo".into(), "bench".into()],
        options: OpenOptions::default(),
    };
    let started = Instant::now();
    let (handoff, _) = store
        .open_interactive_handoff(request)
        .await
        .context("open")?;
    store
        .wait(&handoff.id, Some(Duration::ZERO))
        .await
        .context("wait")?;
    Ok((started.elapsed(), handoff.id))
}

/// An `lf-handoff mcp` process and the client end of its pipes.
struct Server {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    /// Starts `lf-handoff --store URL mcp --wait 0s` in `cwd` and makes
    /// the protocol's handshake.
    fn start(cli: &Path, url: &str, cwd: &Path) -> BenchResult<Self> {
        let mut child = Command::new(cli)
            .args(["--store", url, "mcp", "--wait", "0s"])
            .current_dir(cwd)
            .env_remove("LF_HANDOFF_PARENT")
            .env_remove("TMUX")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context(format!("start {} mcp", cli.display()))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Failure("the server's pipes".into()));
        };
        let mut server = Self {
            child,
            input,
            output: BufReader::new(output),
            next_id: 1,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "lf-handoff-bench", "version": "1"}}),
        )?;
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(server)
    }

    /// `ask_person` with `question`: how long the call took, and the id
    /// of the question.
    fn ask(&mut self, question: &str) -> BenchResult<(Duration, InteractiveHandoffId)> {
        let started = Instant::now();
        let result = self.request(
            "tools/call",
            json!({"name": "ask_person", "arguments": {"question": question}}),
        )?;
        let took = started.elapsed();
        let facts = &result["structuredContent"];
        if result["isError"] != false || facts["state"] != "waiting" {
            return Err(Failure(format!("ask_person answered {result}")));
        }
        let id = facts["id"].as_str().unwrap_or_default();
        let id = InteractiveHandoffId::parse(id).context("the question's id")?;
        Ok((took, id))
    }

    /// Sends a request and reads its result.
    fn request(&mut self, method: &str, params: Value) -> BenchResult<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            let read = self
                .output
                .read_line(&mut line)
                .context("read the server")?;
            if read == 0 {
                return Err(Failure(format!(
                    "the server closed its output during {method}"
                )));
            }
            let message: Value = serde_json::from_str(&line).context("parse the server's line")?;
            if message["id"] == id {
                return match message.get("result") {
                    Some(result) => Ok(result.clone()),
                    None => Err(Failure(format!("{method}: {message}"))),
                };
            }
        }
    }

    fn send(&mut self, message: &Value) -> BenchResult<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.input
            .write_all(line.as_bytes())
            .and_then(|()| self.input.flush())
            .context("write to the server")
    }

    /// Closes its input (the client goes) and waits for it to end.
    fn stop(self) {
        let Self {
            mut child, input, ..
        } = self;
        drop(input);
        let _ = child.wait();
    }
}
