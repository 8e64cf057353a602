//! A worker process for the conformance suite: one store operation in its own
//! OS process. See `lf_handoff_conformance::worker` for the protocol.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lf_handoff_adapters::ListQuery;
use lf_handoff_adapters::PruneOptions;
use lf_handoff_conformance::fixtures::stored_wave;
use lf_handoff_domain::interactive_handoff::OpenOptions;
use std::io::BufRead;
use std::path::PathBuf;

use lf_handoff_adapters::{open_store, ConflictKind, StorageConfig, Store, StoreError};
use lf_handoff_conformance::fixtures::{new_wave, outcome, wave_request};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::StepKey;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(args));
}

async fn run(args: Vec<String>) {
    let config = StorageConfig::from_url(&args[0]).unwrap();
    if args[1] == "probe" {
        return probe(&config, args.get(2)).await;
    }
    let store = open_store(&config).await.unwrap();
    match args[1].as_str() {
        // open WAVE CWD [STEP]: opens on the wave, at STEP when given.
        "open" | "open-step" => {
            let wave = stored_wave(&store, &WaveId::parse(&args[2]).unwrap())
                .await
                .unwrap();
            let request = wave_request(&wave, &PathBuf::from(&args[3]));
            let step = args.get(4).map(|step| StepKey::parse(step).unwrap());
            wait_for_go();
            let options = OpenOptions {
                step,
                expires_at: None,
                ..OpenOptions::default()
            };
            let opened = store
                .open_interactive_handoff(request.with_options(options))
                .await;
            match opened {
                Ok((handoff, true)) => println!("created {}", handoff.id),
                Ok((handoff, false)) => println!("replayed {}", handoff.id),
                Err(e) => println!("error {e}"),
            }
        }
        // wait ID SECONDS: Store::wait, printing `waiting` as it starts
        // and `ended STATUS`, `timed-out` or `error E` when it returns.
        "wait" => {
            let id = InteractiveHandoffId::parse(&args[2]).unwrap();
            let seconds: u64 = args[3].parse().unwrap();
            println!("waiting");
            match store
                .wait(&id, Some(std::time::Duration::from_secs(seconds)))
                .await
            {
                Ok(lf_handoff_adapters::Waited::Ended(handoff)) => {
                    println!("ended {}", handoff.status.as_str());
                }
                Ok(lf_handoff_adapters::Waited::TimedOut(_)) => println!("timed-out"),
                Err(e) => println!("error {e}"),
            }
        }
        "finish" => {
            let id = InteractiveHandoffId::parse(&args[2]).unwrap();
            let n: usize = args[3].parse().unwrap();
            wait_for_go();
            match store
                .finish_interactive_handoff(&id, &outcome(n), None)
                .await
            {
                Ok(_) => println!("ok {n}"),
                Err(StoreError::Conflict {
                    kind: ConflictKind::OtherOutcome,
                    ..
                }) => println!("conflict"),
                Err(e) => println!("error {e}"),
            }
        }
        "claim" => {
            let id = InteractiveHandoffId::parse(&args[2]).unwrap();
            let generation: u32 = args[3].parse().unwrap();
            wait_for_go();
            match store.claim_interactive_handoff_wake(&id, generation).await {
                Ok(wake) if wake.claimed => println!("claimed {generation}"),
                Ok(_) => println!("lost"),
                Err(e) => println!("error {e}"),
            }
        }
        "claim-each" => {
            // claim-each G ID...: claims every id's wake for generation G,
            // in order; prints `ID claimed`, `ID lost` or `ID gone` (pruned).
            let generation: u32 = args[2].parse().unwrap();
            let ids: Vec<InteractiveHandoffId> = args[3..]
                .iter()
                .map(|id| InteractiveHandoffId::parse(id).unwrap())
                .collect();
            wait_for_go();
            for id in &ids {
                match store.claim_interactive_handoff_wake(id, generation).await {
                    Ok(wake) if wake.claimed => println!("{id} claimed"),
                    Ok(_) => println!("{id} lost"),
                    Err(StoreError::NotFound(_)) => println!("{id} gone"),
                    Err(e) => println!("{id} error {e}"),
                }
            }
        }
        "prune" => {
            // prune MICROS BATCH: prunes what finished before MICROS
            // (microseconds since the epoch) in batches of BATCH; prints
            // `pruned HANDOFFS EVENTS`.
            let micros: i64 = args[2].parse().unwrap();
            let batch: usize = args[3].parse().unwrap();
            let cutoff = lf_handoff_domain::timestamp::from_unix_micros(micros).unwrap();
            wait_for_go();
            match store
                .prune(PruneOptions {
                    batch,
                    ..PruneOptions::finished_before(cutoff)
                })
                .await
            {
                Ok(count) => println!("pruned {} {}", count.handoffs, count.events),
                Err(e) => println!("error {e}"),
            }
        }
        "finish-each" => {
            // finish-each N ID...: finishes every id, in order, with outcome N.
            let n: usize = args[2].parse().unwrap();
            let ids: Vec<InteractiveHandoffId> = args[3..]
                .iter()
                .map(|id| InteractiveHandoffId::parse(id).unwrap())
                .collect();
            wait_for_go();
            for id in &ids {
                match store
                    .finish_interactive_handoff(id, &outcome(n), None)
                    .await
                {
                    Ok(_) => println!("{id} ok {n}"),
                    Err(StoreError::Conflict {
                        kind: ConflictKind::OtherOutcome,
                        ..
                    }) => println!("{id} conflict"),
                    Err(StoreError::Conflict {
                        kind: ConflictKind::Expired,
                        ..
                    }) => println!("{id} expired"),
                    Err(e) => println!("{id} error {e}"),
                }
            }
        }
        "extend-each" => {
            // extend-each N ID...: moves every id's deadline to an hour
            // from now, in order.
            let ids: Vec<InteractiveHandoffId> = args[3..]
                .iter()
                .map(|id| InteractiveHandoffId::parse(id).unwrap())
                .collect();
            wait_for_go();
            let until = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
            for id in &ids {
                match store.extend_interactive_handoff(id, until).await {
                    Ok(_) => println!("{id} extended"),
                    Err(StoreError::Conflict {
                        kind: ConflictKind::Expired,
                        ..
                    }) => println!("{id} expired"),
                    Err(StoreError::Conflict {
                        kind: ConflictKind::AlreadyFinished,
                        ..
                    }) => println!("{id} finished"),
                    Err(e) => println!("{id} error {e}"),
                }
            }
        }
        "expire" => {
            // expire N ID...: one sweep; prints each id of the list it expired.
            wait_for_go();
            match store.expire_due().await {
                Ok(expired) => {
                    for handoff in expired {
                        println!("{} expired", handoff.id);
                    }
                }
                Err(e) => println!("error {e}"),
            }
        }
        "list" => {
            wait_for_go();
            match store.list_interactive_handoffs(ListQuery::default()).await {
                Ok(all) => println!("listed {}", all.len()),
                Err(e) => println!("error {e}"),
            }
        }
        "churn" => churn(&store, PathBuf::from(&args[2])).await,
        "populate" => {
            lf_handoff_conformance::hostile::populate(&store, &PathBuf::from(&args[2])).await;
            println!("populated");
            // Leave at once, closing nothing, as a crash would: the files
            // are then exactly what the acknowledged writes left (for
            // SQLite, the database and its WAL), the same on every run.
            std::process::exit(0);
        }
        "hold" => {
            // Keeps the store open until told (or stdin closes), for the
            // single-process backends' "locked by another process" tests.
            wait_for_go();
            drop(store);
            println!("released");
        }
        other => panic!("unknown worker operation {other}"),
    }
}

/// Opens the store and reports how that went, exiting as the CLI does: 0 on
/// success (printing `opened`, and the status of handoff `id` if given),
/// else `<category> <kind> <message>`: `unavailable` (exit 5), `invalid`
/// (2), `not-found` (3) or `conflict` (4), with the error's kind name.
async fn probe(config: &StorageConfig, id: Option<&String>) {
    let error = match open_store(config).await {
        Ok(store) => {
            match id {
                None => println!("opened"),
                Some(id) => {
                    let id = InteractiveHandoffId::parse(id).unwrap();
                    let handoff = store.get_interactive_handoff(&id).await.unwrap().unwrap();
                    println!("opened {}", handoff.status);
                }
            }
            return;
        }
        Err(error) => error,
    };
    let kind = error.kind_name();
    let (word, code) = match &error {
        StoreError::Unavailable { .. } => ("unavailable", 5),
        StoreError::InvalidInput(_) => ("invalid", 2),
        StoreError::NotFound(_) => ("not-found", 3),
        StoreError::Conflict { .. } => ("conflict", 4),
        _ => ("error", 1),
    };
    println!("{word} {kind} {}", error.message());
    std::process::exit(code);
}

/// Runs lifecycles until killed, printing each acknowledged step.
async fn churn(store: &Store, dir: PathBuf) {
    println!("ready");
    for n in 0.. {
        let wave = new_wave(store, &dir).await;
        println!("ack wave {}", wave.id());
        let (handoff, _) = store
            .open_interactive_handoff(wave_request(&wave, &dir))
            .await
            .unwrap();
        println!("ack open {}", handoff.id);
        store.attach_interactive_handoff(&handoff.id).await.unwrap();
        println!("ack attach {}", handoff.id);
        store
            .finish_interactive_handoff(&handoff.id, &outcome(n), None)
            .await
            .unwrap();
        println!("ack finish {} {n}", handoff.id);
        store
            .claim_interactive_handoff_wake(&handoff.id, 2)
            .await
            .unwrap();
        println!("ack claim {}", handoff.id);
    }
}

fn wait_for_go() {
    println!("ready");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
}
