//! `demo`: a narrated full lifecycle on a throwaway SQLite store.
//!
//! Every step goes through the same `Store` calls and builders the other
//! commands use, checks what it got (a replay that changed something, or a
//! claim with the wrong result, fails the demo), and says what happened.
//! The store lives in a temporary directory removed at the end; the store
//! selection (`LF_HANDOFF_STORE`, config file, default) is ignored, except
//! an explicit `--store URL`, which runs the demo on that backend and
//! leaves its records there.

use std::collections::BTreeMap;
use std::path::Path;

use lf_handoff_adapters::{StorageConfig, Store, StoreResult};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent, OpenInteractiveHandoff, OpenOptions, StepKey,
};
use lf_handoff_domain::task::TaskSession;
use lf_handoff_domain::wave_home::WaveHome;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;

use crate::args::{ProjectCreateArgs, SessionBodyArgs, TaskBodyArgs, TaskCreateArgs};
use crate::context::Context;
use crate::error::{CliError, CliResult};
use crate::output::{
    deadline_phrase, descriptor_block, emit, emit_json, history_table, table, timestamp,
};
use crate::{parents, store_select};
use lf_handoff_adapters::UnavailableKind;

/// Runs the demo; `store_flag` is the `--store` flag, when given, and
/// `actor` the one `--actor` or `LF_HANDOFF_ACTOR` names.
///
/// # Errors
/// Any step's error, with its exit code; exit 4 when a step's result is
/// not what the contract promises.
pub async fn demo(store_flag: Option<&str>, json: bool, actor: Option<Actor>) -> CliResult<()> {
    let dir = tempfile::Builder::new()
        .prefix("lf-handoff-demo-")
        .tempdir()
        .map_err(|e| {
            CliError::unavailable(
                UnavailableKind::of_io_error(&e),
                format!("cannot create a temporary directory: {e}"),
            )
            .hint("set TMPDIR to a writable directory")
        })?;
    let throwaway = store_flag.is_none();
    let config = match store_flag {
        Some(url) => store_select::parse_url(url, "--store")?,
        None => StorageConfig::sqlite(dir.path().join("registry.db")),
    };
    let ctx = Context::open(&config, json, actor).await?;
    let store = &ctx.store;
    let mut demo = Demo {
        store,
        say: Narrator::new(json),
    };
    if !json {
        emit("lf-handoff demo: one handoff's whole life, step by step\n\n")?;
    }
    demo.say.step(
        "open_store",
        if throwaway {
            format!("Opened a throwaway {} store: {}", store.backend(), ctx.url)
        } else {
            format!("Opened the {} store {}", store.backend(), ctx.url)
        },
        None,
        &serde_json::json!({ "url": ctx.url, "backend": store.backend() }),
    )?;

    let task = demo.create_parents(dir.path()).await?;
    let request = request(&task);
    let step = StepKey::parse(STEP).map_err(|e| CliError::contract_broken(e.to_string()))?;
    let opened = demo.open_and_replay(&request, &step).await?;
    demo.attach_and_hand_back(&opened).await?;
    let claimed = demo.claim_the_wake(&opened).await?;
    let after = demo.rerun_and_take_over(request, &step, &claimed).await?;
    demo.show_records(&opened, &after).await?;

    let last = if throwaway {
        "Done; the throwaway store is removed.".to_string()
    } else {
        format!("Done; the records stay in {}.", ctx.url)
    };
    demo.say.finish(&last)
}

/// The request the task's first body sends: a login at [`STEP`].
fn request(task: &TaskSession) -> OpenInteractiveHandoff {
    OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Task(task.id.clone()),
        home: WaveHome::Local {
            user: "demo".to_string(),
        },
        cwd: task.worktree.clone(),
        provider: "codex".to_string(),
        provider_session_id: Some("task-thread".to_string()),
        body_generation: 1,
        reason: "The provider needs an OAuth login in a browser".to_string(),
        environment: BTreeMap::from([(
            "DEMO_TOKEN".to_string(),
            "only-the-attaching-person-sees-this".to_string(),
        )]),
        attach_argv: vec![
            "tmux".to_string(),
            "attach-session".to_string(),
            "-t".to_string(),
            "lf-demo-w2-175".to_string(),
        ],
        options: OpenOptions::default(),
    }
}

/// The record of body `generation` of `parent`, as `task body` takes it.
fn body(parent: &InteractiveHandoffParent, generation: u32) -> TaskBodyArgs {
    TaskBodyArgs {
        parent: parent.clone(),
        generation,
        provider: None,
        provider_session: None,
    }
}

/// The demo's store and narrator; each method is one act of the story.
struct Demo<'a> {
    store: &'a Store,
    say: Narrator,
}

impl Demo<'_> {
    /// Creates a wave, a project and a task (its worktree in `dir`), and
    /// returns the task.
    async fn create_parents(&mut self, dir: &Path) -> CliResult<TaskSession> {
        let store = self.store;
        let repo = dir.join("repo");
        let worktree = dir.join("worktree");
        for path in [&repo, &worktree] {
            std::fs::create_dir_all(path).map_err(|e| {
                CliError::unavailable(
                    UnavailableKind::of_io_error(&e),
                    format!("cannot create {}: {e}", path.display()),
                )
            })?;
        }
        let wave = parents::create_wave(store, "demo wave", &repo.display().to_string()).await?;
        self.say.step(
            "create_wave",
            format!(
                "Created wave {} (\"demo wave\", repo {})",
                wave.id(),
                wave.repo()
            ),
            None,
            &wave,
        )?;

        let project = parents::create_project(
            store,
            &ProjectCreateArgs {
                wave: wave.id().clone(),
                name: "Demo project".to_string(),
                body: SessionBodyArgs {
                    provider: "codex".to_string(),
                    provider_session: Some("project-thread".to_string()),
                    generation: 1,
                },
            },
        )
        .await?;
        self.say.step(
            "create_project",
            format!(
                "Created project session {} under the wave (provider codex, body generation 1)",
                project.id
            ),
            None,
            &project,
        )?;

        let task = parents::create_task(
            store,
            &TaskCreateArgs {
                project: project.id.clone(),
                worktree: worktree.clone(),
                body: SessionBodyArgs {
                    provider: "codex".to_string(),
                    provider_session: Some("task-thread".to_string()),
                    generation: 1,
                },
                identifier: Some("W2-175".to_string()),
                title: Some("Log in to the provider".to_string()),
            },
        )
        .await?;
        self.say.step(
            "create_task",
            format!(
                "Created task session {} (W2-175) in worktree {}, body generation 1",
                task.id,
                worktree.display()
            ),
            None,
            &task,
        )?;
        Ok(task)
    }

    /// Opens the handoff at `step` with a deadline, then sends the same
    /// open again as a restarted body would; returns the handoff.
    async fn open_and_replay(
        &mut self,
        request: &OpenInteractiveHandoff,
        step: &StepKey,
    ) -> CliResult<InteractiveHandoff> {
        let store = self.store;
        let parent = &request.parent;
        let options = OpenOptions {
            step: Some(step.clone()),
            expires_at: Some(store.now() + time::Duration::hours(1)),
            ..OpenOptions::default()
        };
        let (opened, created) = store
            .open_interactive_handoff(request.clone().with_options(options))
            .await?;
        expect(created, "the first open must create a handoff")?;
        let deadline = opened.expires_at.map_or_else(String::new, timestamp);
        self.say.step(
            "open",
            format!(
                "Body generation 1 of {parent} needs a person at step {STEP}: opened handoff {} \
                 ({}): {}. It {} ({deadline}), unless someone finishes it first",
                opened.id,
                opened.status.describe(),
                opened.reason,
                deadline_phrase(&opened, store.now())
            ),
            None,
            &opened,
        )?;

        let (replayed, created) = store
            .open_interactive_handoff(
                request
                    .clone()
                    .with_options(OpenOptions::at_step(step.clone())),
            )
            .await?;
        expect(
            !created && replayed == opened,
            "a replayed open must return the same record and write nothing",
        )?;
        self.say.step(
            "replay_open",
            format!(
                "Replayed the same open (as a restarted body would): got {} back with \
                 created=false; nothing was written (updated_at still {})",
                replayed.id,
                replayed
                    .updated_at
                    .format(&Rfc3339)
                    .unwrap_or_else(|_| replayed.updated_at.to_string())
            ),
            None,
            &serde_json::json!({ "created": created, "handoff": replayed }),
        )?;
        Ok(opened)
    }

    /// A person attaches (the descriptor `attach --print` shows) and hands
    /// the work back.
    async fn attach_and_hand_back(&mut self, opened: &InteractiveHandoff) -> CliResult<()> {
        let attached = self.store.attach_interactive_handoff(&opened.id).await?;
        let descriptor = attached.attach_descriptor();
        self.say.step(
            "attach",
            format!(
                "A person attached: status {}. This is what `lf-handoff attach --print` shows \
                 (the demo does not run it):",
                attached.status.describe()
            ),
            Some(descriptor_block(&descriptor, &attached.home)),
            &descriptor,
        )?;

        let outcome = InteractiveHandoffOutcome::HandedBack {
            summary: "Logged in; continue from the login step".to_string(),
        };
        let finished = self
            .store
            .finish_interactive_handoff(&opened.id, &outcome, None)
            .await?;
        self.say.step(
            "hand_back",
            format!(
                "The person handed the work back: status {}, summary \"{}\"",
                finished.status.describe(),
                outcome.text()
            ),
            None,
            &finished,
        )
    }

    /// The task's next body (generation 2) claims the wake, claims again as
    /// after a lost reply, and an unrecorded generation 3 is refused;
    /// returns the handoff as it then is.
    async fn claim_the_wake(
        &mut self,
        opened: &InteractiveHandoff,
    ) -> CliResult<InteractiveHandoff> {
        let store = self.store;
        let parent = &opened.parent;
        let recorded = parents::record_body(store, &body(parent, 2)).await?;
        self.say.step(
            "new_body",
            format!(
                "The task's next body started: {parent} is now at generation {}",
                recorded.parent.body_generation()
            ),
            None,
            &serde_json::json!({ "parent": parent, "generation": recorded.parent.body_generation() }),
        )?;

        let (claimed, after) = claim_and_read(store, &opened.id, 2).await?;
        expect(claimed, "the first claim on a finished handoff must win")?;
        self.say.step(
            "claim_wake",
            format!(
                "Generation 2 claimed the wake of {} (claimed=true) and resumes from the summary",
                after.id
            ),
            None,
            &serde_json::json!({ "claimed": claimed, "handoff": after }),
        )?;

        let (again, _) = claim_and_read(store, &opened.id, 2).await?;
        expect(again, "a retry by the winning generation must still win")?;
        self.say.step(
            "claim_retry",
            "Generation 2 asked again, as after a lost reply: still claimed=true".to_string(),
            None,
            &serde_json::json!({ "claimed": again }),
        )?;

        let (lost, after) = claim_and_read(store, &opened.id, 3).await?;
        expect(
            !lost,
            "a generation the task has not recorded must not take the wake",
        )?;
        self.say.step(
            "claim_lost",
            format!(
                "Generation 3, which the task has not recorded as its body, tried to claim the \
                 same wake: claimed=false, because generation {} holds it",
                holder(&after)
            ),
            None,
            &serde_json::json!({ "claimed": lost, "handoff": after }),
        )?;
        Ok(after)
    }

    /// Generation 3 is recorded and runs `step` again (it gets `claimed`,
    /// the finished handoff, back), takes the wake over, and generation
    /// 2's retry loses; returns the handoff as it then is.
    async fn rerun_and_take_over(
        &mut self,
        request: OpenInteractiveHandoff,
        step: &StepKey,
        claimed: &InteractiveHandoff,
    ) -> CliResult<InteractiveHandoff> {
        let store = self.store;
        parents::record_body(store, &body(&claimed.parent, 3)).await?;
        let rerun_request = OpenInteractiveHandoff {
            body_generation: 3,
            ..request
        };
        let (rerun, created) = store
            .open_interactive_handoff(
                rerun_request.with_options(OpenOptions::at_step(step.clone())),
            )
            .await?;
        expect(
            !created && rerun == *claimed,
            "a re-run step must get its finished handoff back and write nothing",
        )?;
        self.say.step(
            "rerun_step",
            format!(
                "Generation 2 crashed before it moved past the login; the orchestrator \
                 recorded generation 3, which ran step {STEP} again: it got {} back ({}, \
                 created=false), so nobody is asked to log in twice",
                rerun.id,
                rerun.status.describe()
            ),
            None,
            &serde_json::json!({ "created": created, "handoff": rerun }),
        )?;

        let (taken, after) = claim_and_read(store, &claimed.id, 3).await?;
        expect(
            taken && after.wake_claimed_by_generation == Some(3),
            "the task's current body must take the wake over from the one it replaced",
        )?;
        self.say.step(
            "take_over",
            "Generation 3, the task's body now, claimed the wake: claimed=true, it took the \
             wake over from generation 2 and resumes from the summary"
                .to_string(),
            None,
            &serde_json::json!({ "claimed": taken, "holder": after.wake_claimed_by_generation, "handoff": after }),
        )?;

        let (old, after) = claim_and_read(store, &claimed.id, 2).await?;
        expect(!old, "the replaced generation's retry must lose")?;
        self.say.step(
            "old_retry",
            format!(
                "Generation 2 (had it survived) retried its claim: claimed=false, generation {} \
                 holds the wake now",
                holder(&after)
            ),
            None,
            &serde_json::json!({ "claimed": old, "handoff": after }),
        )?;
        Ok(after)
    }

    /// The census row of `after` and the history of `opened`, as `list`
    /// and `history` show them; the history must hold each change once.
    async fn show_records(
        &mut self,
        opened: &InteractiveHandoff,
        after: &InteractiveHandoff,
    ) -> CliResult<()> {
        let store = self.store;
        let row = after.list_row(store.now());
        self.say.step(
            "census",
            "The census row, as `lf-handoff list` shows it (never the environment or the \
             command):"
                .to_string(),
            Some(table(std::slice::from_ref(&row), store.now(), None)),
            &row,
        )?;

        let events = store.history(&opened.id).await?;
        let kinds: Vec<HandoffEventKind> = events.iter().map(|event| event.kind).collect();
        expect(
            kinds
                == [
                    HandoffEventKind::Opened,
                    HandoffEventKind::Attached,
                    HandoffEventKind::Finished,
                    HandoffEventKind::WakeClaimed,
                    HandoffEventKind::WakeTakenOver,
                ],
            "the history must hold every change once, in order, and nothing for the replays",
        )?;
        self.say.step(
            "history",
            format!(
                "Its history, as `lf-handoff history {}` shows it: one event per change, with \
                 who made it; the replays and the lost claims wrote nothing:",
                opened.id
            ),
            Some(history_table(&events)),
            &events,
        )
    }
}

/// The step the demo's body is at.
const STEP: &str = "oauth-login";

/// The generation holding a handoff's wake, for people.
fn holder(handoff: &InteractiveHandoff) -> String {
    handoff
        .wake_claimed_by_generation
        .map_or_else(|| "none".to_string(), |g| g.to_string())
}

/// Fails the demo (exit 4) when the contract was not kept.
fn expect(holds: bool, promise: &str) -> CliResult<()> {
    if holds {
        Ok(())
    } else {
        Err(CliError::contract_broken(format!(
            "demo: the store broke its contract: {promise}"
        )))
    }
}

/// One step in `demo --json`.
#[derive(Debug, Serialize)]
struct Step {
    step: usize,
    action: &'static str,
    message: String,
    data: serde_json::Value,
}

/// Prints each step as it happens, or collects them for `--json`.
struct Narrator {
    json: bool,
    steps: Vec<Step>,
}

impl Narrator {
    fn new(json: bool) -> Self {
        Self {
            json,
            steps: Vec::new(),
        }
    }

    fn step(
        &mut self,
        action: &'static str,
        message: String,
        detail: Option<String>,
        data: &impl Serialize,
    ) -> CliResult<()> {
        let number = self.steps.len() + 1;
        let data = serde_json::to_value(data).map_err(|e| {
            CliError::unavailable(UnavailableKind::Other, format!("cannot encode JSON: {e}"))
        })?;
        if !self.json {
            let mut text = format!("{number:>2}. {message}\n");
            for line in detail.iter().flat_map(|detail| detail.lines()) {
                text.push_str("      ");
                text.push_str(line);
                text.push('\n');
            }
            emit(&text)?;
        }
        self.steps.push(Step {
            step: number,
            action,
            message,
            data,
        });
        Ok(())
    }

    fn finish(self, last: &str) -> CliResult<()> {
        if self.json {
            emit_json(&self.steps)
        } else {
            emit(&format!("\n{last}\n"))
        }
    }
}

/// Claims the wake for `generation`, with the handoff as the claim left it
/// (to show who holds the wake).
///
/// # Errors
/// As `Store::claim_interactive_handoff_wake`.
async fn claim_and_read(
    store: &Store,
    id: &InteractiveHandoffId,
    generation: u32,
) -> StoreResult<(bool, InteractiveHandoff)> {
    let answer = store.claim_interactive_handoff_wake(id, generation).await?;
    Ok((answer.claimed, answer.handoff))
}
