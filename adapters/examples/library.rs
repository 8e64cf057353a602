//! The README's library example ("Using the library"), compiled by
//! `cargo test` and checked against the README by `tests/readme_example.rs`.

use std::collections::BTreeMap;

use lf_handoff_adapters::{open_store, ConflictKind, GenerateId, StorageConfig, StoreError};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoffOutcome, InteractiveHandoffParent, InteractiveHandoffStatus,
    OpenInteractiveHandoff, OpenOptions, StepKey,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    // Or StorageConfig::from_url("postgres://...") / a `[store]` table in your config.
    let store = open_store(&StorageConfig::sqlite(dir.path().join("registry.db"))).await?;

    let wave = Wave::new(WaveId::new(), "product".into(), "/src/product".into());
    store.create_wave(&wave).await?;

    // The body (generation 1 of the wave) needs a person. It names the step
    // it is at, so running the step again (a restarted or replaced body)
    // returns the same handoff instead of asking a person twice.
    let step = StepKey::parse("oauth-login@turn-17")?;
    let opening = OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Wave(wave.id().clone()),
        home: WaveHome::parse("jack@local")?,
        cwd: "/src/product".into(),
        provider: "codex".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: "OAuth login requires a human".into(),
        environment: BTreeMap::from([("LF_HOME".into(), "/tmp/lf".into())]),
        attach_argv: vec![
            "tmux".into(),
            "attach-session".into(),
            "-t".into(),
            "lf-1".into(),
        ],
        options: OpenOptions::at_step(step),
    };
    let (handoff, created) = store.open_interactive_handoff(opening.clone()).await?;
    assert!(created);
    let (again, created) = store.open_interactive_handoff(opening.clone()).await?;
    assert!(!created && again.id == handoff.id);

    // A person attaches and hands the work back.
    let descriptor = store
        .attach_interactive_handoff(&handoff.id)
        .await?
        .attach_descriptor();
    assert_eq!(descriptor.argv[0], "tmux");
    let outcome = InteractiveHandoffOutcome::HandedBack {
        summary: "logged in; continue".into(),
    };
    let done = store
        .finish_interactive_handoff(&handoff.id, &outcome, None)
        .await?;
    assert_eq!(done.status, InteractiveHandoffStatus::HandedBack);
    // Even finished, the step's handoff is the one a re-run gets back.
    let (again, created) = store.open_interactive_handoff(opening).await?;
    assert!(!created && again == done);

    // The next body generation claims the wake exactly once.
    assert!(
        store
            .claim_interactive_handoff_wake(&handoff.id, 2)
            .await?
            .claimed
    );
    assert!(
        !store
            .claim_interactive_handoff_wake(&handoff.id, 3)
            .await?
            .claimed
    );

    // Errors carry a kind to branch on; the message is for people.
    let failed = InteractiveHandoffOutcome::Failed {
        reason: "too late".into(),
    };
    match store
        .finish_interactive_handoff(&handoff.id, &failed, None)
        .await
    {
        Err(StoreError::Conflict {
            kind: ConflictKind::OtherOutcome,
            ..
        }) => {} // the first outcome stays
        Err(StoreError::Unavailable { kind, .. }) if kind.is_transient() => {} // locked, unreachable: retry later
        other => panic!("unexpected {other:?}"),
    }
    Ok(())
}
