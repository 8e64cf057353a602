//! Requests and outcomes the harnesses send, with seeded variety.
//!
//! Texts vary in length and carry quotes, shell metacharacters, newlines and
//! non-ASCII characters, so a crash can land in the middle of records of
//! different sizes and anything a backend would mangle shows up as a
//! mismatch.

use std::collections::BTreeMap;
use std::path::Path;

use lf_handoff_adapters::domain::id::WaveId;
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoffOutcome, InteractiveHandoffParent, OpenInteractiveHandoff,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::wave_home::WaveHome;

use crate::rng::Rng;

const PIECES: &[&str] = &[
    "OAuth login",
    "needs a human",
    "'single'",
    "\"double\"",
    "$(touch /tmp/x); `id`",
    "line\nbreak",
    "tab\there",
    "naïve café ✓",
    "🦀",
    "--flag=value",
    "50%",
    "\\backslash\\",
];

/// A non-blank text of one to `max_pieces` pieces, sometimes padded to a
/// few kilobytes.
pub fn text(rng: &mut Rng, max_pieces: usize) -> String {
    let count = 1 + rng.index(max_pieces.max(1));
    let mut out: Vec<&str> = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(PIECES[rng.index(PIECES.len())]);
    }
    let mut text = out.join(" ");
    if rng.chance(1, 10) {
        let padding = 1 + rng.index(8 * 1024);
        text.push(' ');
        text.push_str(&"x".repeat(padding));
    }
    text
}

/// A request that opens a handoff on `parent`, a body of `generation`,
/// with varied environment, argv and reason.
pub fn open_request(
    rng: &mut Rng,
    parent: &Parent,
    cwd: &Path,
) -> Result<OpenInteractiveHandoff, String> {
    let home = if rng.chance(1, 4) {
        "ssh://jack@build-1.example:2222"
    } else {
        "jack@local"
    };
    let mut environment = BTreeMap::new();
    for n in 0..rng.index(4) {
        environment.insert(format!("LF_VAR_{n}"), text(rng, 3));
    }
    let mut attach_argv = vec!["tmux".to_string(), "attach-session".into(), "-t".into()];
    attach_argv.push(text(rng, 2));
    Ok(OpenInteractiveHandoff {
        parent: parent.reference(),
        home: WaveHome::parse(home).map_err(|e| e.to_string())?,
        cwd: parent
            .worktree()
            .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf),
        provider: parent.provider().unwrap_or("codex").to_string(),
        provider_session_id: parent.provider_session_id().map(str::to_string),
        body_generation: parent.body_generation().max(1),
        reason: text(rng, 4),
        environment,
        attach_argv,
    })
}

/// The simplest request for a wave with no recorded body (generation 1).
pub fn wave_request(wave: &WaveId, cwd: &Path) -> Result<OpenInteractiveHandoff, String> {
    Ok(OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Wave(wave.clone()),
        home: WaveHome::parse("jack@local").map_err(|e| e.to_string())?,
        cwd: cwd.to_path_buf(),
        provider: "codex".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: "a race needs a human".into(),
        environment: BTreeMap::from([("LF_RACE".to_string(), "1".to_string())]),
        attach_argv: vec!["tmux".into(), "attach-session".into(), "-t".into()],
    })
}

/// A random outcome with a varied text.
pub fn random_outcome(rng: &mut Rng) -> InteractiveHandoffOutcome {
    let text = text(rng, 3);
    match rng.below(3) {
        0 => InteractiveHandoffOutcome::Completed { summary: text },
        1 => InteractiveHandoffOutcome::HandedBack { summary: text },
        _ => InteractiveHandoffOutcome::Failed { reason: text },
    }
}
