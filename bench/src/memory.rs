//! Memory: the peak resident set of one `lf-handoff list` process on the
//! largest store of the latency phase (every backend), and on sled what a
//! long-running process holds over a lifecycle loop at each page-cache
//! size (`--sled-caches`).
//!
//! - **One `list`.** `/usr/bin/time -f %M` runs `lf-handoff --store URL
//!   list --limit 1000` (one page, as a person or a script reads the
//!   registry) a few times and reports the child's peak resident set
//!   (`getrusage`'s `ru_maxrss`), so the figure is the command's own,
//!   whatever this program holds. The output must hold a handoff id.
//! - **A lifecycle loop at each cache size.** This program runs itself
//!   again ([`CHILD_ARG`]) on the sled store with `?cache=SIZE`: it opens
//!   the store, then runs lifecycles (create a wave; open, attach, finish,
//!   claim), each followed by `get`s of random handoffs of the whole
//!   store (reads a long-running orchestrator or `serve` makes, spread so
//!   that the cache fills), and reports its resident set (`VmRSS`) after
//!   opening and at five checkpoints, and its peak (`VmHWM`). A child of
//!   its own per size keeps each figure free of the others and of this
//!   process's stores.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lf_handoff_adapters::{open_store, SledConfig, StorageConfig};
use serde::{Deserialize, Serialize};

use crate::child::run_self;
use crate::error::{fail, BenchResult, Context, Failure};
use crate::lifecycle::{create_waves, store_lifecycle};
use crate::population::Population;
use crate::stats::{Rng, Summary};

/// The argument that makes this program the lifecycle-loop child.
pub const CHILD_ARG: &str = "cache-child";

/// GNU time, which reports a child's peak resident set.
const GNU_TIME: &str = "/usr/bin/time";

/// Handoffs one timed `list` returns: one page.
pub const LIST_LIMIT: usize = 1000;

/// The peak resident set of one `lf-handoff list`, or why it is missing.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ListRss {
    /// Measured.
    Measured {
        /// Handoffs in the store.
        handoffs: u64,
        /// The command, without the binary's path.
        command: String,
        /// Runs.
        runs: usize,
        /// The median of the runs' peak resident sets, bytes.
        peak_rss_bytes: u64,
        /// The largest of them, bytes.
        max_rss_bytes: u64,
        /// Wall time of each run.
        wall: Summary,
    },
    /// Could not be measured.
    Unavailable {
        /// Why, and what to do.
        reason: String,
    },
}

/// Runs `lf-handoff --store URL list --limit 1000` `runs` times under GNU
/// time.
pub fn list_rss(cli: Option<&Path>, url: &str, handoffs: u64, runs: usize) -> ListRss {
    let unavailable = |reason: String| ListRss::Unavailable { reason };
    let Some(cli) = cli.filter(|path| path.is_file()) else {
        return unavailable(
            "CLI not built; build it with `cargo build --release -p lf-handoff-cli` \
             (or pass --cli PATH)"
                .into(),
        );
    };
    if !Path::new(GNU_TIME).is_file() {
        return unavailable(format!(
            "{GNU_TIME} (GNU time) is missing; install it (`apt-get install time`)"
        ));
    }
    let limit = LIST_LIMIT.to_string();
    let args = ["--store", url, "list", "--limit", &limit];
    let report = std::env::temp_dir().join(format!("lf-handoff-bench-rss-{}", std::process::id()));
    let mut peaks = Vec::with_capacity(runs);
    let mut walls = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let start = Instant::now();
        let output = Command::new(GNU_TIME)
            .arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(&report)
            .arg(cli)
            .args(args)
            .stdin(Stdio::null())
            .output();
        let elapsed = start.elapsed();
        let output = match output {
            Ok(output) => output,
            Err(error) => return unavailable(format!("cannot run {GNU_TIME}: {error}")),
        };
        if !output.status.success() || !String::from_utf8_lossy(&output.stdout).contains("ih_") {
            return unavailable(format!(
                "`lf-handoff {}` exited with {} and listed no handoff: {}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let kib = std::fs::read_to_string(&report)
            .ok()
            .and_then(|text| text.lines().last()?.trim().parse::<u64>().ok());
        let Some(kib) = kib else {
            return unavailable(format!("{GNU_TIME} reported no peak resident set"));
        };
        peaks.push(kib * 1024);
        walls.push(elapsed);
    }
    std::fs::remove_file(&report).ok();
    peaks.sort_unstable();
    ListRss::Measured {
        handoffs,
        command: format!("list --limit {LIST_LIMIT}"),
        runs: peaks.len(),
        peak_rss_bytes: peaks[peaks.len() / 2],
        max_rss_bytes: peaks.last().copied().unwrap_or(0),
        wall: Summary::of(&walls),
    }
}

/// What the lifecycle loop held at one sled cache size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheLoop {
    /// sled's page cache, bytes.
    pub cache_bytes: u64,
    /// Handoffs in the store before the loop.
    pub handoffs: u64,
    /// Lifecycles run.
    pub lifecycles: usize,
    /// `get`s of random handoffs after each lifecycle.
    pub gets_per_lifecycle: usize,
    /// Resident set right after the store opened, bytes.
    pub open_rss_bytes: u64,
    /// Resident set at each checkpoint: (lifecycles done, bytes).
    pub checkpoints: Vec<(usize, u64)>,
    /// The process's peak resident set, bytes.
    pub peak_rss_bytes: u64,
    /// Lifecycles a second, counting the lifecycles' own time only.
    pub lifecycles_per_sec: f64,
    /// The loop's `get`s.
    pub get: Summary,
}

/// Runs the lifecycle loop on the sled store at `path` (holding `handoffs`
/// handoffs of `population`) once per cache size, each in a child process.
pub fn cache_loops(
    path: &Path,
    population: &Population,
    handoffs: u64,
    caches: &[u64],
    lifecycles: usize,
    gets_per_lifecycle: usize,
) -> BenchResult<Vec<CacheLoop>> {
    let mut loops = Vec::with_capacity(caches.len());
    for &cache in caches {
        let mut sled = SledConfig::new(path);
        sled.cache = cache;
        let url = StorageConfig::Sled(sled).url();
        let line = run_self(
            &format!("cache-loop child on {url}"),
            &[
                CHILD_ARG.to_string(),
                url.clone(),
                population.base_micros().to_string(),
                handoffs.to_string(),
                lifecycles.to_string(),
                gets_per_lifecycle.to_string(),
            ],
        )?;
        match serde_json::from_str::<CacheLoop>(&line) {
            Ok(figures) => loops.push(figures),
            Err(error) => {
                return fail(format!(
                    "the cache-loop child on {url} reported {line:?}: {error}"
                ))
            }
        }
    }
    Ok(loops)
}

/// The lifecycle-loop child: `URL BASE_MICROS HANDOFFS LIFECYCLES GETS`;
/// prints its [`CacheLoop`] as one JSON line.
pub async fn child_main(args: &[String]) -> BenchResult<()> {
    let [url, base, handoffs, lifecycles, gets] = args else {
        return fail(format!(
            "usage: {CHILD_ARG} URL BASE_MICROS HANDOFFS LIFECYCLES GETS (got {args:?})"
        ));
    };
    let number = |text: &str, what: &str| {
        text.parse::<u64>()
            .map_err(|e| Failure(format!("{what} {text:?}: {e}")))
    };
    let config = StorageConfig::from_url(url).context("store URL")?;
    let StorageConfig::Sled(sled) = &config else {
        return fail(format!("not a sled store: {url}"));
    };
    let population = Population::from_base_arg(base)?;
    let handoffs = number(handoffs, "handoffs")?.max(1);
    let lifecycles = usize::try_from(number(lifecycles, "lifecycles")?).unwrap_or(0);
    let gets_per_lifecycle = usize::try_from(number(gets, "gets")?).unwrap_or(0);

    let store = open_store(&config).await.context("open store")?;
    let (open_rss_bytes, _) = resident()?;
    let waves = create_waves(&store, lifecycles).await?;
    let mut rng = Rng::new(handoffs ^ 0xCAC4E);
    let mut lifecycle_time = Duration::ZERO;
    let mut gets = Vec::with_capacity(lifecycles * gets_per_lifecycle);
    let mut checkpoints = Vec::new();
    let every = (lifecycles / 5).max(1);
    for (done, wave) in waves.iter().enumerate() {
        lifecycle_time += store_lifecycle(&store, wave)
            .await?
            .iter()
            .sum::<Duration>();
        for _ in 0..gets_per_lifecycle {
            let id = population.handoff_id(rng.below(handoffs));
            let start = Instant::now();
            let found = store.get_interactive_handoff(&id).await.context("get")?;
            gets.push(start.elapsed());
            if found.is_none() {
                return fail(format!("get {id}: the loaded handoff was not found"));
            }
        }
        if (done + 1) % every == 0 || done + 1 == lifecycles {
            checkpoints.push((done + 1, resident()?.0));
        }
    }
    drop(store);
    let (_, peak_rss_bytes) = resident()?;
    let figures = CacheLoop {
        cache_bytes: sled.cache,
        handoffs,
        lifecycles,
        gets_per_lifecycle,
        open_rss_bytes,
        checkpoints,
        peak_rss_bytes,
        lifecycles_per_sec: crate::stats::ratio(lifecycles as f64, lifecycle_time.as_secs_f64()),
        get: Summary::of(&gets),
    };
    let line = serde_json::to_string(&figures).context("encode the figures")?;
    let mut out = std::io::stdout();
    writeln!(out, "{line}").context("write the figures")?;
    out.flush().context("write the figures")?;
    Ok(())
}

/// This process's resident set and its peak (`VmRSS`, `VmHWM`), bytes.
fn resident() -> BenchResult<(u64, u64)> {
    resident_of("self")
}

/// The resident set and its peak (`VmRSS`, `VmHWM`), in bytes, of process
/// `pid` (a number, or `self`), from `/proc/PID/status`.
pub fn resident_of(pid: &str) -> BenchResult<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).context(format!("read {path}"))?;
    let bytes = |key: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    match (bytes("VmRSS:"), bytes("VmHWM:")) {
        (Some(rss), Some(peak)) => Ok((rss, peak)),
        _ => fail(format!("{path} holds no VmRSS or VmHWM")),
    }
}

/// 64 MiB -> "64 MiB", 1 GiB -> "1 GiB".
pub fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= 1024 * MIB && bytes % (1024 * MIB) == 0 {
        format!("{} GiB", bytes / (1024 * MIB))
    } else {
        format!("{} MiB", bytes / MIB)
    }
}

/// The table's lines for these figures.
pub fn table_lines(out: &mut String, list: &[ListRss], loops: &[CacheLoop]) {
    use std::fmt::Write as _;
    for rss in list {
        match rss {
            ListRss::Measured {
                handoffs,
                command,
                runs,
                peak_rss_bytes,
                max_rss_bytes,
                wall,
            } => {
                let _ = writeln!(
                    out,
                    "  memory of one `lf-handoff {command}` at {} handoffs ({runs} runs): peak RSS \
                     {:.0} MB (median; max {:.0} MB), {:.0} ms",
                    crate::stats::short(*handoffs),
                    *peak_rss_bytes as f64 / 1e6,
                    *max_rss_bytes as f64 / 1e6,
                    wall.median_us / 1000.0
                );
            }
            ListRss::Unavailable { reason } => {
                let _ = writeln!(
                    out,
                    "  memory of one `lf-handoff list`: not measured ({reason})"
                );
            }
        }
    }
    let Some(first) = loops.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "\n  sled lifecycle loop on {} handoffs, a process of its own per cache size: {} \
         lifecycles, {} random gets after each; RSS MB",
        crate::stats::short(first.handoffs),
        first.lifecycles,
        first.gets_per_lifecycle
    );
    let mut header = format!("  {:<10} {:>8}", "cache", "opened");
    for (done, _) in &first.checkpoints {
        let _ = write!(header, " {:>8}", format!("@{done}"));
    }
    let _ = writeln!(
        out,
        "{header} {:>8} {:>13} {:>16}",
        "peak", "lifecycles/s", "get µs med/p99"
    );
    for row in loops {
        let mut line = format!(
            "  {:<10} {:>8.0}",
            size_text(row.cache_bytes),
            row.open_rss_bytes as f64 / 1e6
        );
        for (_, rss) in &row.checkpoints {
            let _ = write!(line, " {:>8.0}", *rss as f64 / 1e6);
        }
        let _ = writeln!(
            out,
            "{line} {:>8.0} {:>13.0} {:>16}",
            row.peak_rss_bytes as f64 / 1e6,
            row.lifecycles_per_sec,
            format!("{:.0} / {:.0}", row.get.median_us, row.get.p99_us)
        );
    }
}
