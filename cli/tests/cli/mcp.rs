//! `lf-handoff mcp` and `serve`'s `/mcp` (C28) driven by a client no one
//! here wrote: the Model Context Protocol's official Python SDK (the
//! package `mcp`), over standard input and output and over streamable
//! HTTP. The scenarios are `mcp/tests/python/scenarios.py`: the tools
//! listed with their schemas, `ask_person` answered at the command line,
//! `await_answer` answered after `ask_person` returned "waiting", wrong
//! arguments as tool errors with the server serving on, and a client gone
//! mid-wait leaving the question open for the same step to find.
//!
//! The SDK lives in a virtual environment: its Python is
//! `LF_HANDOFF_TEST_MCP_PYTHON`, else `target/venv-mcp/bin/python` in the
//! repository (`.ci/run` makes it). Without one the tests say so and
//! pass, unless `LF_HANDOFF_TEST_REQUIRE_MCP` is set, as in CI.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::serve::Serving;
use crate::support::{binary, Sandbox};

/// The server's bound on a tool's wait in these tests: long enough for an
/// answer given at once to arrive within it, short enough for "waiting".
const WAIT_SECONDS: &str = "3";

#[test]
fn the_python_sdk_drives_the_tools_over_stdio() {
    let Some(python) = python() else { return };
    let sandbox = Sandbox::new();
    let store = format!("sqlite://{}", sandbox.path("registry.db").display());
    let agent = sandbox.mkdir("agent");
    let mut command = scenarios(&python, &sandbox, &agent);
    command.args([
        "stdio",
        &binary().display().to_string(),
        &store,
        WAIT_SECONDS,
    ]);
    passes(command);
}

#[test]
fn the_python_sdk_drives_the_tools_over_streamable_http() {
    let Some(python) = python() else { return };
    let sandbox = Sandbox::new();
    let serving = Serving::start(&sandbox, &["--mcp-wait", &format!("{WAIT_SECONDS}s")]);
    let url = format!("http://{}", serving.address);
    let agent = sandbox.mkdir("agent");
    let mut command = scenarios(&python, &sandbox, &agent);
    // The command line answers as a person, through the service.
    command
        .env("LF_HANDOFF_TOKEN", serving.token("person"))
        .args([
            "http",
            &binary().display().to_string(),
            &url,
            WAIT_SECONDS,
            &format!("{url}/mcp"),
            &serving.token("agent"),
        ]);
    passes(command);
}

/// The Python of the virtual environment holding the SDK; `None` (the
/// test skips, saying why) when there is none and CI does not require it.
fn python() -> Option<PathBuf> {
    let python = std::env::var_os("LF_HANDOFF_TEST_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/venv-mcp/bin/python"));
    let importable = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !importable {
        assert!(
            std::env::var_os("LF_HANDOFF_TEST_REQUIRE_MCP").is_none(),
            "the MCP Python SDK is required (LF_HANDOFF_TEST_REQUIRE_MCP) but {} cannot import \
             mcp; make it with python3 -m venv target/venv-mcp && target/venv-mcp/bin/pip \
             install mcp==2.3.0 (as .ci/run does)",
            python.display()
        );
        eprintln!(
            "skipped: no MCP Python SDK at {} (python3 -m venv target/venv-mcp && \
             target/venv-mcp/bin/pip install mcp==2.3.0, or set LF_HANDOFF_TEST_MCP_PYTHON)",
            python.display()
        );
        return None;
    }
    Some(python)
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The scenarios script run by `python` in `cwd` (the agent's directory),
/// with the sandbox's home and no store of the caller's environment.
fn scenarios(python: &Path, sandbox: &Sandbox, cwd: &Path) -> Command {
    let mut command = Command::new(python);
    command
        .arg(repository().join("mcp/tests/python/scenarios.py"))
        .current_dir(cwd)
        .env_remove("LF_HANDOFF_STORE")
        .env_remove("LF_HANDOFF_PARENT")
        .env_remove("LF_HANDOFF_PUBLIC_URL")
        .env_remove("TMUX")
        .env("LF_HOME", sandbox.path("lf"))
        .env("HOME", sandbox.path("home"))
        .env("XDG_CONFIG_HOME", sandbox.path("config"));
    command
}

fn passes(mut command: Command) {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python SDK's scenarios failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all passed"), "{stdout}\n{stderr}");
    eprintln!("{stdout}");
}
