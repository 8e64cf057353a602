//! `attach`: running the stored argv with its environment in its cwd, with
//! no shell in between; and the ssh command of a remote home.

use std::path::Path;

use crate::support::{assert_kind, script, Run, Sandbox};

/// Arguments a shell would mangle; each must reach the command as is.
const TRICKY: &[&str] = &[
    "a;b",
    "$(touch pwned)",
    "`touch pwned2`",
    "it's \"quoted\"",
    "*",
    "two  words",
    "--flag=x y",
    "back\\slash",
    "ünïcode",
    "> pwned3",
    "a && touch pwned4 || true",
    "| cat",
    "line\nbreak",
    "~",
    "-c",
    "%s %n $HOME ${PATH}",
];

/// A script that records its arguments, `$SECRET`, `$INHERITED` and its
/// working directory into `$OUT`, then exits 7.
fn recorder(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("recorder.sh");
    script(
        &path,
        r#"pwd -P > "$OUT/cwd"
printf '%s' "$SECRET" > "$OUT/secret"
printf '%s' "$INHERITED" > "$OUT/inherited"
n=0
for arg in "$@"; do
  n=$((n + 1))
  printf '%s' "$arg" > "$OUT/arg$n"
done
echo "$n" > "$OUT/argc"
exit 7
"#,
    );
    path
}

fn recorded_args(out: &Path) -> Vec<String> {
    let count: usize = std::fs::read_to_string(out.join("argc"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (1..=count)
        .map(|n| std::fs::read_to_string(out.join(format!("arg{n}"))).unwrap())
        .collect()
}

const SECRET: &str = "s p$HOME'\"`x`";

#[test]
fn attach_runs_the_argv_without_a_shell_with_its_env_and_cwd() {
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work dir");
    let out = sandbox.mkdir("out");
    let recorder = recorder(sandbox.dir.path());
    let mut argv = vec![recorder.to_str().unwrap()];
    argv.extend(TRICKY);
    let out_env = format!("OUT={}", out.display());
    let secret_env = format!("SECRET={SECRET}");
    let handoff = sandbox.open_on_wave(&work, &[&out_env, &secret_env], &argv);
    let id = handoff["id"].as_str().unwrap();

    let recorder = recorder.to_str().unwrap();
    let mut command = sandbox.command(&["attach", id, "--allow-program", recorder]);
    command.env("INHERITED", "from the caller");
    let run = Run::from_output(command.output().unwrap());
    assert_eq!(run.code, 7, "attach exits with the command's code: {run:?}");
    // Before it runs, it shows the command and every environment name, and
    // no value.
    assert!(run.stderr.contains(recorder), "{run:?}");
    assert!(run.stderr.contains("environment: OUT, SECRET"), "{run:?}");
    assert!(!run.stderr.contains(SECRET), "{run:?}");

    assert_eq!(
        recorded_args(&out),
        TRICKY,
        "every argument arrives exactly"
    );
    assert_eq!(std::fs::read_to_string(out.join("secret")).unwrap(), SECRET);
    assert_eq!(
        std::fs::read_to_string(out.join("inherited")).unwrap(),
        "from the caller",
        "the caller's environment is kept"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("cwd")).unwrap().trim_end(),
        work.canonicalize().unwrap().to_str().unwrap()
    );
    for pwned in ["pwned", "pwned2", "pwned3", "pwned4"] {
        assert!(!work.join(pwned).exists(), "nothing was run by a shell");
        assert!(!sandbox.path(pwned).exists(), "nothing was run by a shell");
    }
    let status = sandbox.json(&["status", id]);
    assert_eq!(
        status["status"], "attached",
        "the attach was recorded first"
    );
}

#[test]
fn attach_exits_with_the_command_own_code_including_zero() {
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work");
    let ok = sandbox.open_on_wave(&work, &[], &["true"]);
    let run = sandbox.run(&[
        "attach",
        ok["id"].as_str().unwrap(),
        "--allow-program",
        "true",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let failing = sandbox.open_on_wave(&work, &[], &["sh", "-c", "exit 42"]);
    let run = sandbox.run(&[
        "attach",
        failing["id"].as_str().unwrap(),
        "--allow-program",
        "sh",
    ]);
    assert_eq!(run.code, 42, "{run:?}");
}

#[test]
fn attach_that_cannot_run_exits_127_or_126_with_an_error_line() {
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work");
    let missing = sandbox.open_on_wave(&work, &[], &["lf-no-such-command-anywhere"]);
    let id = missing["id"].as_str().unwrap();
    let allow = ["--allow-program", "lf-no-such-command-anywhere"];
    // Without --json the `attaching to ...` note comes first.
    let run = sandbox.run(&[&["attach", id][..], &allow].concat());
    assert_eq!(run.code, 127, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(
        run.stderr.lines().last().unwrap().starts_with("error: "),
        "{run:?}"
    );
    let run = sandbox.run(&[&["--json", "attach", id][..], &allow].concat());
    let error = assert_kind(&run, 127, "command_not_found", "attach a missing command");
    assert!(error.contains("lf-no-such-command-anywhere"), "{error}");

    let gone = sandbox.open_on_wave(&sandbox.path("no/such/dir"), &[], &["true"]);
    let error = sandbox.fails(
        &[
            "attach",
            gone["id"].as_str().unwrap(),
            "--allow-program",
            "true",
        ],
        126,
        "cannot_execute",
    );
    assert!(error.contains("no/such/dir"), "{error}");

    let finished = sandbox.handoff();
    sandbox.ok(&["complete", &finished, "--summary", "done"]);
    sandbox.fails(&["attach", &finished], 4, "already_finished");
}

#[test]
fn a_remote_home_prints_an_ssh_command_that_reaches_the_argv_exactly() {
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("remote work");
    let out = sandbox.mkdir("out");
    let bin = sandbox.mkdir("bin");
    let recorder = recorder(sandbox.dir.path());
    // A stand-in for ssh: records its arguments and runs the remote
    // command with a shell, as sshd does on the far side.
    script(
        &bin.join("ssh"),
        r#"n=0
for arg in "$@"; do n=$((n + 1)); printf '%s\n' "$arg" >> "$OUT/ssh-args"; last=$arg; done
exec sh -c "$last"
"#,
    );
    let wave = sandbox.wave();
    let out_env = format!("OUT={}", out.display());
    let secret_env = format!("SECRET={SECRET}");
    let mut args = vec![
        "open",
        "--parent",
        &wave,
        "--home",
        "jack@build-1:2222",
        "--cwd",
        work.to_str().unwrap(),
        "--provider",
        "codex",
        "--generation",
        "1",
        "--reason",
        "remote login",
        "--env",
        &out_env,
        "--env",
        &secret_env,
        "--",
        recorder.to_str().unwrap(),
    ];
    args.extend(TRICKY);
    let id = sandbox.ok(&args).trim().to_string();

    let printed = sandbox.run(&["attach", &id]);
    assert_eq!(printed.code, 0, "{printed:?}");
    let line = printed.stdout.trim_end();
    assert_eq!(printed.stdout.lines().count(), 1, "{printed:?}");
    assert!(
        line.starts_with("ssh -t -p 2222 jack@build-1 -- "),
        "{line}"
    );
    assert!(
        printed.stderr.contains("ssh://jack@build-1:2222"),
        "{printed:?}"
    );
    let json = sandbox.json(&["attach", &id]);
    assert_eq!(json["ssh_command"], line);
    assert_eq!(json["descriptor"]["host"], "build-1");
    assert_eq!(json["descriptor"]["status"], "attached");

    // The person's shell may read `$'...'` (bash, zsh); the far side runs
    // the command with a plain POSIX sh (the stand-in's `sh -c`, dash on
    // Debian), where every argument must still arrive exactly.
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let ran = std::process::Command::new("bash")
        .args(["-c", line])
        .env("PATH", path)
        .env("OUT", &out)
        .env("INHERITED", "")
        .output()
        .unwrap();
    assert_eq!(ran.status.code(), Some(7), "{ran:?}");
    let ssh_args = std::fs::read_to_string(out.join("ssh-args")).unwrap();
    assert!(
        ssh_args.starts_with("-t\n-p\n2222\njack@build-1\n--\n"),
        "{ssh_args}"
    );
    assert_eq!(
        recorded_args(&out),
        TRICKY,
        "every argument arrives exactly"
    );
    assert_eq!(std::fs::read_to_string(out.join("secret")).unwrap(), SECRET);
    assert_eq!(
        std::fs::read_to_string(out.join("cwd")).unwrap().trim_end(),
        work.canonicalize().unwrap().to_str().unwrap()
    );
    for pwned in ["pwned", "pwned2", "pwned3", "pwned4"] {
        assert!(!work.join(pwned).exists(), "nothing was run by a shell");
    }
}

/// The attach boundary (C29): a program not on the allow-list is refused
/// before the attach is recorded, naming it and how to allow it; the flag
/// allows it for one attach and the config file for good (its list
/// replaces the default); a program is compared as written; `--print`
/// always prints.
#[test]
fn attach_runs_only_allowed_programs_and_says_how_to_allow_one() {
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work");
    let mark = work.join("mark");
    let handoff = sandbox.open_on_wave(
        &work,
        &["MARK=ran"],
        &["sh", "-c", "printf %s \"$MARK\" > mark"],
    );
    let id = handoff["id"].as_str().unwrap();

    let error = sandbox.fails(&["attach", id], 126, "program_not_allowed");
    for part in [
        "(tmux)",
        "\"sh\"",
        "--allow-program sh",
        "config.toml",
        r#"allow_programs = ["tmux", "sh"]"#,
        "--print",
    ] {
        assert!(error.contains(part), "{part}: {error}");
    }
    assert!(!mark.exists(), "nothing ran");
    assert_eq!(
        sandbox.json(&["status", id])["status"],
        "waiting",
        "a refused attach records nothing"
    );

    // Compared as written: a path to a shell, or a `tmux` the agent could
    // have written, is not what the person allowed.
    for argv in [&["/bin/sh", "-c", "true"][..], &["./tmux", "attach"]] {
        let other = sandbox.open_on_wave(&work, &[], argv);
        let other = other["id"].as_str().unwrap();
        let args = ["attach", other, "--allow-program", "sh"];
        let error = sandbox.fails(&args, 126, "program_not_allowed");
        assert!(error.contains(argv[0]), "{error}");
    }

    let printed = sandbox.ok(&["attach", id, "--print"]);
    assert!(printed.contains("MARK=ran"), "{printed}");
    assert!(!mark.exists(), "--print runs nothing");

    let run = sandbox.run(&["attach", id, "--allow-program", "sh"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "ran");
    assert!(
        run.stderr.contains("sh -c 'printf %s \"$MARK\" > mark'"),
        "the whole command is shown: {run:?}"
    );
    assert!(run.stderr.contains("environment: MARK)"), "{run:?}");

    let config = sandbox.mkdir("config/lf-handoff").join("config.toml");
    std::fs::write(&config, "[attach]\nallow_programs = [\"sh\"]\n").unwrap();
    std::fs::remove_file(&mark).unwrap();
    let run = sandbox.run(&["attach", id]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(mark.exists(), "the config file allows sh");
    let tmux = sandbox.handoff();
    let error = sandbox.fails(&["attach", &tmux], 126, "program_not_allowed");
    assert!(
        error.contains(r#"allow_programs = ["sh", "tmux"]"#),
        "the config file's list replaces the default: {error}"
    );

    std::fs::write(&config, "[attach]\nallow_program = [\"sh\"]\n").unwrap();
    let error = sandbox.fails(&["attach", id], 2, "usage");
    assert!(error.contains("allow_program"), "{error}");
}

/// The attach boundary (C29): `open` refuses an environment name that
/// changes how programs load or start, naming it, also when the step's
/// handoff exists; nothing is written.
#[test]
fn open_refuses_an_environment_that_changes_how_programs_start() {
    let sandbox = Sandbox::new();
    let wave = format!("wave:{}", sandbox.wave());
    let open = |env: Option<&str>| {
        let mut extra = vec!["--step", "login@turn-1"];
        if let Some(pair) = env {
            extra.extend(["--env", pair]);
        }
        sandbox.open_args(&wave, &extra)
    };
    for round in ["before", "after"] {
        for pair in ["BASH_ENV=/tmp/x", "LD_PRELOAD=/tmp/x.so", "PATH=/tmp/bin"] {
            let name = pair.split('=').next().unwrap();
            let error = sandbox.fails(&open(Some(pair)), 2, "invalid_input");
            assert!(error.contains(name), "{round} {name}: {error}");
        }
        if round == "before" {
            assert_eq!(sandbox.json(&["list"]), serde_json::json!([]));
            sandbox.ok(&open(None));
        }
    }
    assert_eq!(sandbox.json(&["list"]).as_array().unwrap().len(), 1);
}

/// The attach boundary (C29): a handoff an earlier release stored with an
/// environment name `open` now refuses (brought here by an import, which
/// keeps it) is refused by `attach` as `open` refuses it, whatever the
/// allow-list, recording nothing; `--print` still shows it.
#[test]
fn attach_refuses_a_stored_environment_that_open_refuses() {
    let sandbox = Sandbox::new();
    let work = sandbox.mkdir("work");
    let handoff = sandbox.open_on_wave(&work, &["K=v"], &["tmux", "attach"]);
    let id = handoff["id"].as_str().unwrap();
    let export = sandbox.path("export.jsonl");
    sandbox.ok(&["export", "--output", export.to_str().unwrap()]);
    let text = std::fs::read_to_string(&export).unwrap();
    let older_text = text.replace(
        r#""environment":{"K":"v"}"#,
        r#""environment":{"BASH_ENV":"/tmp/x","K":"v"}"#,
    );
    assert_ne!(older_text, text);
    let older_file = sandbox.path("older.jsonl");
    std::fs::write(&older_file, older_text).unwrap();
    let older = format!("sqlite://{}", sandbox.path("older.db").display());
    sandbox.ok(&[
        "--store",
        &older,
        "import",
        "--input",
        older_file.to_str().unwrap(),
    ]);

    for allow in [&[][..], &["--allow-program", "tmux"]] {
        let args = [&["--store", &older, "attach", id][..], allow].concat();
        let error = sandbox.fails(&args, 2, "invalid_input");
        assert!(error.contains("\"BASH_ENV\""), "{error}");
        assert!(error.contains("--print"), "{error}");
    }
    let status = sandbox.json(&["--store", &older, "status", id]);
    assert_eq!(status["status"], "waiting", "nothing was recorded");
    let printed = sandbox.ok(&["--store", &older, "attach", id, "--print"]);
    assert!(printed.contains("BASH_ENV=/tmp/x"), "{printed}");
}
