//! The cost of a question with a shape (C26): the same lifecycle (open,
//! attach, finish, claim_wake) on the same store, once plain and once
//! asking allow or deny and finishing with a choice, taking turns
//! lifecycle by lifecycle so a slow moment of the disk hits both alike.
//! The goal: the choice lifecycle's throughput at least 0.9 of the plain
//! one's (the check costs nothing a user notices).

use std::time::Duration;

use lf_handoff_adapters::open_store;
use lf_handoff_adapters::testing::OpenRequest;
use lf_handoff_domain::interactive_handoff::Answer;
use serde::Serialize;

use crate::backends::BenchBackend;
use crate::error::{BenchResult, Context};
use crate::lifecycle::{create_waves, request, store_lifecycle_of, Side};
use crate::stats::{ratio, Summary};

/// The figures of one backend.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerFigures {
    /// Lifecycles per side.
    pub lifecycles: usize,
    /// Plain lifecycles per second.
    pub plain_per_sec: f64,
    /// Lifecycles with choices and a choice answer per second.
    pub choice_per_sec: f64,
    /// choice / plain.
    pub ratio: f64,
    /// Median plain lifecycle, µs.
    pub plain_median_us: f64,
    /// Median choice lifecycle, µs.
    pub choice_median_us: f64,
}

/// Measures `lifecycles` lifecycles of each kind on one store.
pub async fn measure(backend: &dyn BenchBackend, lifecycles: usize) -> BenchResult<AnswerFigures> {
    let config = backend.new_store("answers").await?;
    let store = open_store(&config).await.context("open store")?;
    let warmup = 10;
    let waves = create_waves(&store, 2 * (lifecycles + warmup)).await?;
    let (plain_waves, choice_waves) = waves.split_at(lifecycles + warmup);
    let allow = Answer::choice("allow");
    let choice_request = |wave| {
        OpenRequest::on_wave(wave)
            .cwd("/srv/repos/product")
            .choices(&["allow=Allow", "deny=Deny"])
            .on_expiry(Answer::choice("deny"))
            .build()
    };
    let mut plain = Side::default();
    let mut choice = Side::default();
    for turn in 0..lifecycles + warmup {
        let plain_run = store_lifecycle_of(&store, request(&plain_waves[turn]), None);
        let choice_run =
            store_lifecycle_of(&store, choice_request(&choice_waves[turn]), Some(&allow));
        let (p, c): ([Duration; 4], [Duration; 4]) = if turn % 2 == 0 {
            let p = plain_run.await?;
            (p, choice_run.await?)
        } else {
            let c = choice_run.await?;
            (plain_run.await?, c)
        };
        if turn >= warmup {
            plain.record(p);
            choice.record(c);
        }
    }
    drop(store);
    backend.remove(&config).await;
    Ok(AnswerFigures {
        lifecycles: plain.count,
        plain_per_sec: plain.per_sec(),
        choice_per_sec: choice.per_sec(),
        ratio: ratio(choice.per_sec(), plain.per_sec()),
        plain_median_us: Summary::of(&plain.lifecycles).median_us,
        choice_median_us: Summary::of(&choice.lifecycles).median_us,
    })
}
