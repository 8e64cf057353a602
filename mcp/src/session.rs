//! Who asks: the settings a server is started with, the parent its
//! questions go under, and where the agent's work runs.

use std::path::PathBuf;
use std::time::Duration;

use lf_handoff_application::{Store, StoreError, StoreResult};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use sha2::{Digest, Sha256};

/// How long `ask_person` and `await_answer` wait for an answer unless
/// configured: below the tool-call timeouts of common clients (60 s in
/// the protocol's TypeScript SDK), so a call returns before its client
/// gives up on it.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(45);

/// The provider a session wave's handoffs name.
const PROVIDER: &str = "mcp";

/// What a server is started with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long `ask_person` and `await_answer` wait at most.
    pub wait: Duration,
    /// The parent the questions go under.
    pub parent: ParentChoice,
    /// Where the agent's work runs, as the handoffs say.
    pub place: Place,
    /// The URL the service is reached at, when there is one: a waiting
    /// question's link is its page in the inbox, `{inbox}/inbox/{id}`.
    pub inbox: Option<String>,
}

/// The parent the questions go under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParentChoice {
    /// This parent (`LF_HANDOFF_PARENT`), as its current body: its
    /// generation, provider and conversation are read from the store at
    /// each question, and a task's questions run in its worktree.
    Named(InteractiveHandoffParent),
    /// A wave of the client's own, made (idempotently) at its first
    /// question. Its id is derived from `key`, so a client with the same
    /// key, after any restart, has the same wave.
    SessionWave {
        /// What identifies the client.
        key: String,
        /// The wave's name, for people.
        name: String,
        /// The wave's repository: the directory the client works in.
        repo: String,
    },
}

impl ParentChoice {
    /// The wave of a client identified by `key`.
    pub fn session_wave(key: &str, name: &str, repo: &str) -> Self {
        Self::SessionWave {
            key: key.to_string(),
            name: name.to_string(),
            repo: repo.to_string(),
        }
    }

    /// The id of the wave of the client identified by `key`: the first
    /// 16 bytes of a SHA-256 of the key, as a version 8 UUID.
    pub fn wave_id(key: &str) -> WaveId {
        let digest = Sha256::digest(format!("lf-handoff mcp session wave\0{key}").as_bytes());
        let mut bytes = [0_u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        WaveId::from_uuid(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }

    /// The parent's reference, without reading the store.
    pub fn reference(&self) -> InteractiveHandoffParent {
        match self {
            Self::Named(parent) => parent.clone(),
            Self::SessionWave { key, .. } => InteractiveHandoffParent::Wave(Self::wave_id(key)),
        }
    }

    /// The parent as stored; a session wave is stored first when missing.
    ///
    /// # Errors
    /// `NotFound` for a named parent the store does not hold; `Conflict`
    /// when another wave holds the session wave's id; `Unavailable` on
    /// storage failure.
    pub async fn resolve(&self, store: &Store) -> StoreResult<Parent> {
        let reference = self.reference();
        if let Some(parent) = store.get_parent(&reference).await? {
            return Ok(parent);
        }
        match self {
            Self::Named(parent) => Err(StoreError::NotFound(format!(
                "parent {parent} does not exist (named by LF_HANDOFF_PARENT or --parent)"
            ))),
            Self::SessionWave { key, name, repo } => {
                let wave = Wave::new(Self::wave_id(key), name.clone(), repo.clone());
                store.create_wave(&wave).await?;
                Ok(Parent::Wave(wave))
            }
        }
    }
}

/// Where the agent's work runs, as its handoffs say: what a person needs
/// to join it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The machine and account.
    pub home: WaveHome,
    /// The directory (a task's questions use its worktree instead).
    pub cwd: PathBuf,
    /// The command a person runs to join the agent.
    pub attach_argv: Vec<String>,
}

impl Place {
    /// This process's place: the account (`USER`, else `LOGNAME`, else
    /// `agent`) on this machine, the current directory, and the agent's
    /// tmux session when it runs in tmux (`TMUX` set and `tmux` names the
    /// session), else a command that says how to answer.
    pub fn this_process() -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let attach_argv = tmux_session().map_or_else(nothing_to_attach, |session| {
            vec![
                "tmux".to_string(),
                "attach-session".to_string(),
                "-t".to_string(),
                session,
            ]
        });
        Self {
            home: local_home(),
            cwd,
            attach_argv,
        }
    }

    /// The place of a client the service reaches over HTTP, which does
    /// not say where it runs: the service's own account and `/`, and a
    /// command that says how to answer.
    pub fn remote() -> Self {
        Self {
            home: local_home(),
            cwd: PathBuf::from("/"),
            attach_argv: nothing_to_attach(),
        }
    }
}

/// What a handoff asks for, read from the parent as its current body
/// would give it.
#[derive(Debug, Clone)]
pub(crate) struct Asker {
    pub parent: InteractiveHandoffParent,
    pub generation: u32,
    pub provider: String,
    pub provider_session_id: Option<String>,
    /// A task's worktree, which its handoffs must run in.
    pub worktree: Option<PathBuf>,
}

impl From<&Parent> for Asker {
    fn from(parent: &Parent) -> Self {
        Self {
            parent: parent.reference(),
            generation: parent.body_generation(),
            provider: parent.provider().unwrap_or(PROVIDER).to_string(),
            provider_session_id: parent.provider_session_id().map(str::to_string),
            worktree: parent.worktree().map(PathBuf::from),
        }
    }
}

/// `USER@local`, with the account's name kept to what a home allows.
fn local_home() -> WaveHome {
    let user = ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok())
        .map(|user| {
            user.chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                .collect::<String>()
                .trim_start_matches('-')
                .to_string()
        })
        .filter(|user| !user.is_empty())
        .unwrap_or_else(|| "agent".to_string());
    WaveHome::Local { user }
}

/// The tmux session this process runs in, when it runs in one.
fn tmux_session() -> Option<String> {
    std::env::var_os("TMUX")?;
    let output = std::process::Command::new("tmux")
        .args(["display-message", "-p", "#{session_name}"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let name = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !name.is_empty()).then_some(name)
}

/// The attach command of a question with no terminal to join: it says
/// where the answer goes.
fn nothing_to_attach() -> Vec<String> {
    vec![
        "echo".to_string(),
        "The agent asked through its MCP client and has no terminal to join: answer with \
         lf-handoff complete ID --summary TEXT (or back, fail), or in the inbox."
            .to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_wave_id_is_the_same_for_the_same_key_only() {
        let a = ParentChoice::wave_id("stdio:ann@host:/work");
        assert_eq!(a, ParentChoice::wave_id("stdio:ann@host:/work"));
        assert_ne!(a, ParentChoice::wave_id("stdio:ann@host:/work2"));
        assert!(WaveId::parse(a.as_str()).is_ok());
    }
}
