//! Requests and outcomes the harnesses send, with seeded variety.
//!
//! Texts vary in length and carry quotes, shell metacharacters, newlines and
//! non-ASCII characters, so a crash can land in the middle of records of
//! different sizes and anything a backend would mangle shows up as a
//! mismatch.

use std::collections::BTreeMap;
use std::path::Path;

use lf_handoff_adapters::testing::OpenRequest;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoffOutcome, InteractiveHandoffParent, OpenInteractiveHandoff,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave_home::WaveHome;

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
    let mut request = OpenRequest::on(parent)
        .home(WaveHome::parse(home).map_err(|e| e.to_string())?)
        .environment(environment)
        .attach_argv(attach_argv)
        .reason(text(rng, 4));
    if parent.worktree().is_none() {
        request = request.cwd(cwd);
    }
    Ok(request.build())
}

/// The simplest request for a wave with no recorded body (generation 1).
pub fn wave_request(wave: &WaveId, cwd: &Path) -> OpenInteractiveHandoff {
    OpenRequest::new(&InteractiveHandoffParent::Wave(wave.clone()))
        .cwd(cwd)
        .reason("a race needs a human")
        .environment(BTreeMap::from([("LF_RACE".to_string(), "1".to_string())]))
        .build()
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
