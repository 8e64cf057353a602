//! `lf-handoff-failover`: the long form of the failover test (contract
//! C25, docs/RELIABILITY.md). Starts a primary and a standby of its own,
//! runs clients through a store URL naming both, kills the primary (`kill
//! -9` of every process of it) and promotes the standby as many times as
//! asked, rebuilding the killed server as the next standby each time, and
//! reports what was acknowledged, unknown and lost.
//!
//! ```text
//! lf-handoff-failover [--failovers 20] [--clients 6] [--commit on|remote_apply|async] [--seed 1]
//! ```
//!
//! Exits 0 when every invariant held and, with a synchronous standby,
//! nothing acknowledged was lost; 1 otherwise; 2 on bad arguments or when
//! the servers cannot run. With `--commit async` (the control) lost writes
//! are reported, not failed on.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use lf_handoff_conformance::failover::{run, Commit, Failure, Plan};

fn main() -> ExitCode {
    let plan = match parse(std::env::args().skip(1)) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("lf-handoff-failover: {message}");
            eprintln!(
                "usage: lf-handoff-failover [--failovers N] [--clients N] \
                 [--commit on|remote_apply|async] [--seed N]"
            );
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("lf-handoff-failover: {error}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(run(&plan, &|line| println!("{line}"))) {
        Ok(report) => report,
        Err(failure @ Failure::Setup(_)) => {
            eprintln!("lf-handoff-failover: {failure}");
            return ExitCode::from(2);
        }
        Err(failure) => {
            eprintln!("lf-handoff-failover: {failure}");
            return ExitCode::from(1);
        }
    };
    println!(
        "{}, {} clients, seed {}: {report}",
        plan.commit, plan.clients, plan.seed
    );
    for error in &report.errors {
        println!("unknown outcome: {error}");
    }
    for violation in &report.violations {
        println!("VIOLATION: {violation}");
    }
    let lost_counts = plan.commit != Commit::Async && report.lost > 0;
    if report.violations.is_empty() && !lost_counts {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Plan, String> {
    let mut plan = Plan {
        commit: Commit::On,
        clients: 6,
        failovers: 20,
        seed: 1,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--failovers" => plan.failovers = number(&flag, &value()?)?,
            "--clients" => plan.clients = number(&flag, &value()?)?,
            "--seed" => plan.seed = number(&flag, &value()?)? as u64,
            "--commit" => plan.commit = Commit::parse(&value()?)?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if plan.clients == 0 || plan.failovers == 0 {
        return Err("--clients and --failovers must be at least 1".into());
    }
    Ok(plan)
}

fn number(flag: &str, text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{flag} takes a whole number, got {text:?}"))
}
