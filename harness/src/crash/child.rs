//! Starting a crash child, killing it, and reading what it printed; the
//! crash story's parents and the bodies recorded after each kill.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, GenerateId, Store};
use lf_handoff_conformance::fixtures;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use super::ledger::Ledger;
use super::{CrashFigures, CrashOptions};
use crate::crash_child::{
    parse_reference, story_arg, CHILD_ARG, DEADLINE_LANES_ARG, FAKE_ACK_ARG, FAKE_STEPS_ARG,
    TRIAL_ARG,
};
use crate::rng::Rng;
use crate::target::StoreTarget;

/// How long a child may take to open the store before the trial fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// One line the child printed.
#[derive(Debug)]
pub(crate) enum Event {
    /// `opening` or `ready`: the child's progress in opening the store.
    Ready,
    Begin {
        lane: usize,
        kind: String,
        key: String,
    },
    Ack {
        lane: usize,
        kind: String,
        key: String,
        json: String,
    },
    Error(String),
    Moved {
        parent: InteractiveHandoffParent,
        step: u64,
    },
}

pub(crate) fn parse_event(line: &str) -> Result<Event, String> {
    if line == "ready" || line == "opening" {
        return Ok(Event::Ready);
    }
    if let Some(rest) = line.strip_prefix("error ") {
        return Ok(Event::Error(rest.to_string()));
    }
    if let Some(rest) = line.strip_prefix("step ") {
        let mut words = rest.split(' ').skip(1);
        let (Some(parent), Some(step), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("the child printed {line:?}"));
        };
        return Ok(Event::Moved {
            parent: parse_reference(parent)?,
            step: step
                .parse()
                .map_err(|e| format!("the child printed {line:?}: {e}"))?,
        });
    }
    let mut words = line.splitn(5, ' ');
    let tag = words.next().unwrap_or_default();
    let lane = words
        .next()
        .and_then(|w| w.parse::<usize>().ok())
        .ok_or_else(|| format!("the child printed {line:?}"))?;
    let kind = words.next().unwrap_or_default().to_string();
    let key = words.next().unwrap_or_default().to_string();
    match (tag, words.next()) {
        ("begin", None) if !key.is_empty() => Ok(Event::Begin { lane, kind, key }),
        ("ack", Some(json)) => Ok(Event::Ack {
            lane,
            kind,
            key,
            json: json.to_string(),
        }),
        _ => Err(format!("the child printed {line:?}")),
    }
}

/// Creates the story's parents (alternately a wave and a task session
/// under a new project) with body generation 1 recorded.
pub(super) async fn create_story(
    target: &StoreTarget,
    count: usize,
    ledger: &mut Ledger,
) -> Result<(), String> {
    let store = open_store(target.config())
        .await
        .map_err(|e| format!("cannot open the store to create the story's parents: {e}"))?;
    for n in 0..count {
        let dir = target.work_dir();
        let wave = Wave::new(
            WaveId::new(),
            format!("story {n}"),
            dir.display().to_string(),
        );
        store
            .create_wave(&wave)
            .await
            .map_err(|e| format!("create story wave {}: {e}", wave.id()))?;
        ledger.parents.insert(
            Parent::Wave(wave.clone()).reference(),
            Parent::Wave(wave.clone()),
        );
        let parent = if n % 2 == 0 {
            Parent::Wave(wave)
        } else {
            let project = fixtures::fresh_project(wave.id());
            store
                .create_project_session(&project)
                .await
                .map_err(|e| format!("create story project {}: {e}", project.id))?;
            let project_parent = Parent::Project(project.clone());
            ledger
                .parents
                .insert(project_parent.reference(), project_parent);
            let (task, pr) = fixtures::fresh_task(&project, &dir.join("worktree"));
            store
                .create_task_session(&task, &pr)
                .await
                .map_err(|e| format!("create story task {}: {e}", task.id))?;
            Parent::Task(task)
        };
        let reference = parent.reference();
        let parent = if parent.latest_process().is_some() {
            parent
        } else {
            store
                .record_body(&reference, fixtures::body(1, None))
                .await
                .map_err(|e| format!("record body 1 on story parent {reference}: {e}"))?
        };
        let generation = parent.body_generation();
        ledger.parents.insert(reference.clone(), parent);
        ledger.story.parents.push((reference, generation, 0));
    }
    Ok(())
}

/// Records the next body generation of every story parent.
pub(super) async fn record_next_bodies(store: &Store, ledger: &mut Ledger) -> Result<(), String> {
    for (reference, generation, _) in &mut ledger.story.parents {
        let next = *generation + 1;
        let parent = store
            .record_body(reference, fixtures::body(next, None))
            .await
            .map_err(|e| format!("record body {next} on story parent {reference}: {e}"))?;
        *generation = next;
        ledger.parents.insert(reference.clone(), parent);
    }
    Ok(())
}
/// Starts a child, kills it at a random moment and returns what it printed.
pub(super) async fn kill_one_child(
    target: &StoreTarget,
    options: &CrashOptions,
    (trial, story): (u64, &[(InteractiveHandoffParent, u64)]),
    exe: &Path,
    rng: &mut Rng,
    startup: &mut Duration,
    figures: &mut CrashFigures,
) -> Result<Vec<String>, String> {
    let child_seed = rng.next_u64();
    let early = rng.chance(1, 8) && options.min_acks == 0;
    let max_delay_ms = u64::try_from(options.max_delay.as_millis()).unwrap_or(u64::MAX);
    // An early kill lands within one and a half times the last measured
    // startup, so about two in three land before the store is open.
    let startup_ms = u64::try_from(startup.as_millis()).unwrap_or(u64::MAX);
    let delay = Duration::from_millis(if early {
        rng.below(startup_ms.saturating_mul(3) / 2 + 1)
    } else {
        rng.below(max_delay_ms.saturating_add(1))
    });
    let spawned = Instant::now();
    let mut child = child_command(target, options, (trial, story), exe, child_seed)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the child {}: {e}", exe.display()))?;
    let mut output = ChildOutput::read(&mut child)?;
    let mut lines = Vec::new();
    if !early {
        let min_acks = options.min_acks;
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            let mut ready = false;
            let mut acks = 0;
            while let Some(line) = output.lines.recv().await {
                if line == "ready" && !ready {
                    *startup = spawned.elapsed();
                }
                ready |= line == "ready";
                acks += usize::from(line.starts_with("ack "));
                lines.push(line);
                if ready && acks >= min_acks {
                    return true;
                }
            }
            false
        })
        .await;
        if ready != Ok(true) {
            let _ = child.start_kill();
            let _ = child.wait().await;
            let stderr = output.errors.await.unwrap_or_default();
            return Err(format!(
                "the child did not open the store and acknowledge {min_acks} transitions \
                 within {} s: {}",
                READY_TIMEOUT.as_secs(),
                stderr.trim()
            ));
        }
    }
    tokio::time::sleep(delay).await;
    // The child may have failed by itself already; that is checked below.
    let _ = child.start_kill();
    let status = child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for the child: {e}"))?;
    let stderr = output.finish(&mut lines).await;
    if status.signal() != Some(9) {
        figures.fail(format!(
            "the child ended by itself ({status}) before the kill: {}",
            stderr.trim()
        ));
    }
    if !lines.iter().any(|line| line == "ready") {
        figures.kills_before_ready += 1;
    }
    Ok(lines)
}

/// The command that starts a crash child for `trial`.
fn child_command(
    target: &StoreTarget,
    options: &CrashOptions,
    (trial, story): (u64, &[(InteractiveHandoffParent, u64)]),
    exe: &Path,
    child_seed: u64,
) -> Command {
    let mut command = Command::new(exe);
    command
        .arg(CHILD_ARG)
        .arg(target.child_url())
        .arg(child_seed.to_string())
        .arg(options.lanes.to_string())
        .arg(target.work_dir());
    if options.fake_acks {
        command.arg(FAKE_ACK_ARG);
    }
    if options.fake_steps {
        command.arg(FAKE_STEPS_ARG);
    }
    if !story.is_empty() {
        command.arg(story_arg(story));
    }
    command.arg(format!("{TRIAL_ARG}{trial}"));
    if options.deadline_lanes > 0 {
        command.arg(format!("{DEADLINE_LANES_ARG}{}", options.deadline_lanes));
    }
    command
}

/// What a child prints, read as it comes: whole stdout lines, and all of
/// stderr.
pub(crate) struct ChildOutput {
    /// The child's whole lines, in order.
    pub(crate) lines: mpsc::UnboundedReceiver<String>,
    reader: tokio::task::JoinHandle<()>,
    errors: tokio::task::JoinHandle<String>,
}

impl ChildOutput {
    /// Starts reading the piped stdout and stderr of `child`.
    pub(crate) fn read(child: &mut tokio::process::Child) -> Result<Self, String> {
        let stdout = child.stdout.take().ok_or("the child has no stdout")?;
        let mut stderr = child.stderr.take().ok_or("the child has no stderr")?;
        let (sender, lines) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            // Only whole lines count: a kill during a write of a long line
            // may leave its start without the newline, and such a line was
            // never printed in full, so its transition stays in flight.
            let mut stdout = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match stdout.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if line.pop() != Some(b'\n') {
                    break;
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                if sender.send(text).is_err() {
                    break;
                }
            }
        });
        let errors = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        Ok(Self {
            lines,
            reader,
            errors,
        })
    }

    /// Once the child is dead: appends the lines not read yet to `lines`
    /// and returns what it wrote to stderr.
    pub(crate) async fn finish(mut self, lines: &mut Vec<String>) -> String {
        let _ = self.reader.await;
        while let Some(line) = self.lines.recv().await {
            lines.push(line);
        }
        self.errors.await.unwrap_or_default()
    }
}
