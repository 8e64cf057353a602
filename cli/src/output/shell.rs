//! Shell quoting: the line `attach --print` gives a person to paste.

use std::borrow::Cow;
use std::fmt::Write as _;

use lf_handoff_domain::interactive_handoff::AttachDescriptor;
use lf_handoff_domain::wave_home::WaveHome;

/// A line a person can paste into a shell to attach: for a local home
/// `cd DIR && env K=V ARGV...`, for a remote one the `ssh` command that does
/// the same there. Every word is quoted, so nothing in it is re-parsed.
pub fn shell_line(descriptor: &AttachDescriptor, home: &WaveHome) -> String {
    match home {
        WaveHome::Local { .. } => local_command(descriptor, false, quote),
        WaveHome::Ssh { user, host, port } => {
            let mut words = vec!["ssh".to_string(), "-t".to_string()];
            if let Some(port) = port {
                words.push("-p".to_string());
                words.push(port.to_string());
            }
            words.push(format!("{user}@{host}"));
            words.push("--".to_string());
            let mut line = shell_words(&words);
            line.push(' ');
            // The far side runs the command with the account's login shell,
            // which may be a plain POSIX sh (dash): quote it for any POSIX
            // shell there. Only the outer word, read by the shell the person
            // pastes into, may use `$'...'` escapes.
            line.push_str(&quote(&local_command(descriptor, true, quote_posix)));
            line
        }
    }
}

/// `cd -- DIR && [exec] [env K=V...] ARGV...`, every word quoted with
/// `quote_word`.
fn local_command(
    descriptor: &AttachDescriptor,
    exec: bool,
    quote_word: fn(&str) -> Cow<'_, str>,
) -> String {
    let quote = quote_word;
    let mut line = format!("cd -- {} && ", quote(&descriptor.cwd.display().to_string()));
    if exec {
        line.push_str("exec ");
    }
    if !descriptor.environment.is_empty() {
        line.push_str("env ");
        for (key, value) in &descriptor.environment {
            line.push_str(&quote(&format!("{key}={value}")));
            line.push(' ');
        }
    }
    let words: Vec<Cow<'_, str>> = descriptor.argv.iter().map(|word| quote(word)).collect();
    line.push_str(&words.join(" "));
    line
}

/// The words quoted for a POSIX shell and joined with spaces.
pub fn shell_words<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|word| quote(word.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One word quoted for any POSIX shell (dash included): left bare when it
/// holds only characters no shell treats specially, else single-quoted,
/// with control characters kept as they are inside the quotes.
fn quote_posix(word: &str) -> Cow<'_, str> {
    if is_plain(word) {
        return Cow::Borrowed(word);
    }
    Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
}

fn is_plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b))
}

/// One word quoted for a shell: left bare when it holds only characters no
/// shell treats specially, else single-quoted. A word holding control
/// characters uses `$'...'` escapes instead (bash, zsh, ksh and POSIX
/// 2024 shells), so the printed line stays correct and never sends a raw
/// control character to the terminal.
pub fn quote(word: &str) -> Cow<'_, str> {
    if is_plain(word) {
        return Cow::Borrowed(word);
    }
    if !word.chars().any(char::is_control) {
        // Double quotes read better around a word holding single quotes,
        // and are as safe when nothing in it is special inside them.
        if word.contains('\'') && !word.contains(['$', '`', '"', '\\', '!']) {
            return Cow::Owned(format!("\"{word}\""));
        }
        return Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            '\r' => out.push_str(r"\r"),
            c if c.is_control() => {
                let mut bytes = [0u8; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(out, "\\x{byte:02x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn quoting_leaves_plain_words_and_wraps_the_rest() {
        assert_eq!(quote("tmux"), "tmux");
        assert_eq!(quote("/a/b-c.d"), "/a/b-c.d");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(quote("it's $HOME"), r"'it'\''s $HOME'");
        assert_eq!(quote("$(x);`y`"), "'$(x);`y`'");
        assert_eq!(quote("a\nb'\x1b"), r"$'a\nb\'\x1b'");
    }

    #[test]
    fn posix_quoting_keeps_control_characters_inside_single_quotes() {
        assert_eq!(quote_posix("tmux"), "tmux");
        assert_eq!(quote_posix(""), "''");
        assert_eq!(quote_posix("it's"), r"'it'\''s'");
        assert_eq!(quote_posix("a\nb\x1b"), "'a\nb\x1b'");
    }

    /// What `shell -c "printf %s WORD"` prints.
    fn echoed(shell: &str, quoted: &str) -> String {
        let output = std::process::Command::new(shell)
            .arg("-c")
            .arg(format!("printf %s {quoted}"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{shell} refused {quoted:?}: {output:?}"
        );
        String::from_utf8(output.stdout).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Any word (no NUL: an argument cannot hold one) comes back from a
        /// POSIX sh exactly as quoted by `quote_posix`, and from bash as
        /// quoted by `quote`.
        #[test]
        fn quoted_words_reach_the_shell_exactly(
            word in any::<String>().prop_filter("no NUL", |w| !w.contains('\0'))
        ) {
            prop_assert_eq!(echoed("sh", &quote_posix(&word)), word.clone());
            prop_assert_eq!(echoed("bash", &quote(&word)), word);
        }
    }
}
