//! Tests of what the conformance suite cannot reach through the service:
//! a transition stores the whole record the domain returned.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use lf_handoff_application::ports::{HandoffRepository, TransitionOutcome};
use lf_handoff_application::GenerateId;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoffParent, InteractiveHandoffStatus, OpenInteractiveHandoff, Transition,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;

use super::SqlStore;
use crate::sqlite::SqliteEngine;
use crate::{open_store, StorageConfig};

#[tokio::test(flavor = "multi_thread")]
async fn a_transition_stores_every_field_the_domain_returned() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::sqlite(dir.path().join("store.db"));
    let store = open_store(&config).await.unwrap();
    let wave = Wave::new(WaveId::new(), "w".into(), dir.path().display().to_string());
    store.create_wave(&wave).await.unwrap();
    let (opened, _) = store
        .open_interactive_handoff(OpenInteractiveHandoff {
            parent: InteractiveHandoffParent::Wave(wave.id().clone()),
            home: WaveHome::parse("jack@local").unwrap(),
            cwd: dir.path().to_path_buf(),
            provider: "codex".into(),
            provider_session_id: None,
            body_generation: 1,
            reason: "login".into(),
            environment: BTreeMap::new(),
            attach_argv: vec!["tmux".into(), "attach".into()],
        })
        .await
        .unwrap();

    // Fields no transition of today's domain changes: the store must keep
    // them as the domain returned them all the same.
    let mut next = opened.clone();
    next.status = InteractiveHandoffStatus::Attached;
    next.attached_at = Some(next.updated_at);
    next.home = WaveHome::parse("ssh://jill@example.org:2222").unwrap();
    next.cwd = PathBuf::from("/elsewhere");
    next.provider = "claude".into();
    next.provider_session_id = Some("session-2".into());
    next.body_generation = 2;
    next.reason = "review".into();
    next.environment = BTreeMap::from([("TERM".into(), "xterm".into())]);
    next.attach_argv = vec!["ssh".into(), "-t".into()];

    let StorageConfig::Sqlite(sqlite) = &config else {
        unreachable!("a SQLite configuration")
    };
    let sql = SqlStore::new(SqliteEngine::open(sqlite).await.unwrap());
    let decided = next.clone();
    let outcome = sql
        .transition(
            &opened.id,
            Arc::new(move |_| Ok(Transition::Changed(decided.clone()).into())),
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(TransitionOutcome::Applied {
            handoff: Box::new(next.clone()),
            answer: true,
        })
    );
    let stored = sql.load(&opened.id).await.unwrap().unwrap();
    assert_eq!(stored.value, next);
    assert_eq!(stored.version, 2);
}
