//! A worker process for the conformance suite: one store operation in its own
//! OS process. See `lf_handoff_conformance::worker` for the protocol.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::PathBuf;

use lf_handoff_adapters::domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_adapters::{open_store, StorageConfig, Store, StoreError};
use lf_handoff_conformance::fixtures::{new_wave, outcome, wave_request};

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
    let store = open_store(&config).await.unwrap();
    match args[1].as_str() {
        "open" => {
            let wave = store
                .get_wave(&WaveId::parse(&args[2]).unwrap())
                .await
                .unwrap()
                .unwrap();
            let request = wave_request(&wave, &PathBuf::from(&args[3]));
            wait_for_go();
            match store.open_interactive_handoff(request).await {
                Ok((handoff, true)) => println!("created {}", handoff.id),
                Ok((handoff, false)) => println!("replayed {}", handoff.id),
                Err(e) => println!("error {e}"),
            }
        }
        "finish" => {
            let id = InteractiveHandoffId::parse(&args[2]).unwrap();
            let n: usize = args[3].parse().unwrap();
            wait_for_go();
            match store.finish_interactive_handoff(&id, &outcome(n)).await {
                Ok(_) => println!("ok {n}"),
                Err(StoreError::Conflict(_)) => println!("conflict"),
                Err(e) => println!("error {e}"),
            }
        }
        "claim" => {
            let id = InteractiveHandoffId::parse(&args[2]).unwrap();
            let generation: u32 = args[3].parse().unwrap();
            wait_for_go();
            match store.claim_interactive_handoff_wake(&id, generation).await {
                Ok(true) => println!("claimed {generation}"),
                Ok(false) => println!("lost"),
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
        other => panic!("unknown worker operation {other}"),
    }
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
            .finish_interactive_handoff(&handoff.id, &outcome(n))
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
