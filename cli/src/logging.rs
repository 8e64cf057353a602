//! What the command line logs, and where: `tracing` output on stderr,
//! never on stdout (where the result and `--json` output go).
//!
//! Off by default. `-v` shows every store call's end, with its duration,
//! inside its span: the backend, the handoff or parent it concerns;
//! `-vv` adds lost compare-and-swap races and the engine's own events
//! (sqlx's statements). `RUST_LOG`, when set and not empty, replaces both
//! (`RUST_LOG=lf_handoff_application=debug`, say). A `RUST_LOG` that does
//! not parse is reported once on stderr and logging stays off.

use tracing_subscriber::EnvFilter;

/// The directives of `-v` (1) and `-vv` (2 or more).
fn directives(verbose: u8) -> Option<&'static str> {
    match verbose {
        0 => None,
        1 => Some("lf_handoff_application=info,lf_handoff_adapters=info,lf_handoff_server=info"),
        _ => Some(
            "lf_handoff_application=debug,lf_handoff_adapters=debug,lf_handoff_server=debug,sqlx=debug",
        ),
    }
}

/// Installs the stderr subscriber `verbose` and `RUST_LOG` ask for, if any.
pub fn init(verbose: u8) {
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty());
    let filter = match (from_env, directives(verbose)) {
        (Some(value), _) => match EnvFilter::try_new(&value) {
            Ok(filter) => filter,
            Err(error) => {
                eprintln!("lf-handoff: ignoring RUST_LOG={value:?}: {error}");
                return;
            }
        },
        (None, Some(directives)) => EnvFilter::new(directives),
        (None, None) => return,
    };
    // Only fails when a subscriber is already installed: keep that one.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_level_parses() {
        for verbose in 1..=3 {
            let directives = directives(verbose).unwrap();
            assert!(EnvFilter::try_new(directives).is_ok(), "{directives}");
        }
        assert_eq!(directives(0), None);
    }
}
