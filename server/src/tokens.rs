//! Tokens and the tokens file (contract C20).
//!
//! A token is `lfh_` and 256 random bits in base64url (43 characters). It
//! is shown once, when it is made; the tokens file keeps only its SHA-256,
//! one line per token:
//!
//! ```text
//! sha256:<64 hex digits><TAB><scopes, comma-separated><TAB><created, RFC 3339><TAB><name>
//! ```
//!
//! Lines starting with `#` and blank lines are ignored, so revoking a
//! token is deleting its line (`lf-handoff token revoke NAME` does it).
//! The file is created with mode 0600 and every change is written to a
//! temporary file beside it, synced and renamed over it, so a reader (a
//! server re-reading it on SIGHUP) sees the old file or the new one,
//! never half of one.
//!
//! A name follows the actor's rules (non-blank, no control characters, at
//! most 200 bytes), since it is the actor of every change made with the
//! token (C15). A presented token is hashed and its hash compared with
//! every entry's in constant time ([`TokenTable::authenticate`]).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use lf_handoff_adapters::{ConflictKind, StoreError, StoreResult, UnavailableKind};
use lf_handoff_api::Scope;
use lf_handoff_domain::interactive_handoff::Actor;
use ring::rand::SecureRandom;
use ring::{digest, hmac, rand};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::hex;

/// What every token starts with.
pub const TOKEN_PREFIX: &str = "lfh_";

/// How many random bytes a token carries (256 bits).
const TOKEN_BYTES: usize = 32;

/// What a line's hash starts with.
const HASH_PREFIX: &str = "sha256:";

/// The first line of a new tokens file.
const HEADER: &str = "# lf-handoff tokens: sha256:HASH<TAB>SCOPES<TAB>CREATED<TAB>NAME; \
                      delete a line to revoke its token";

/// Who a token belongs to, and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name: the actor of the changes made with it.
    pub name: Actor,
    /// Its scopes (at least one).
    pub scopes: Vec<Scope>,
}

/// One line of the tokens file. Its `Debug` hides the hash, which a
/// sign-in cookie signs.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenEntry {
    /// The token's name and scopes.
    pub caller: Caller,
    /// When it was made.
    pub created: OffsetDateTime,
    hash: [u8; 32],
}

impl std::fmt::Debug for TokenEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEntry")
            .field("caller", &self.caller)
            .field("created", &self.created)
            .field("hash", &"<redacted>")
            .finish()
    }
}

impl TokenEntry {
    /// The stored hash of the token (what a sign-in cookie signs).
    pub fn hash(&self) -> &[u8] {
        &self.hash
    }

    fn line(&self) -> String {
        let scopes: Vec<&str> = self.caller.scopes.iter().map(|s| s.as_str()).collect();
        let created = self
            .created
            .format(&Rfc3339)
            .unwrap_or_else(|_| self.created.unix_timestamp().to_string());
        format!(
            "{HASH_PREFIX}{}\t{}\t{created}\t{}",
            hex::encode(&self.hash),
            scopes.join(","),
            self.caller.name.as_str()
        )
    }
}

/// A token made now, with its entry: the text is shown once, the entry
/// kept. Its `Debug` hides the token.
pub struct NewToken {
    /// The token text, `lfh_...`: shown once, never stored.
    pub token: String,
    /// What the tokens file keeps of it.
    pub entry: TokenEntry,
}

impl std::fmt::Debug for NewToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewToken")
            .field("token", &"<redacted>")
            .field("entry", &self.entry)
            .finish()
    }
}

/// Makes a token named `name` holding `scopes`, at `now`.
///
/// # Errors
/// `InvalidInput` for a name that is not a valid actor or no scope;
/// `Unavailable` when the system has no randomness to give.
pub fn make_token(name: &str, scopes: &[Scope], now: OffsetDateTime) -> StoreResult<NewToken> {
    let name =
        Actor::parse(name).map_err(|e| StoreError::InvalidInput(format!("token name: {e}")))?;
    if scopes.is_empty() {
        return Err(StoreError::InvalidInput(
            "a token needs at least one scope: agent, person or operator".into(),
        ));
    }
    let mut scopes = scopes.to_vec();
    scopes.sort();
    scopes.dedup();
    let mut bytes = [0_u8; TOKEN_BYTES];
    rand::SystemRandom::new().fill(&mut bytes).map_err(|_| {
        StoreError::unavailable(
            UnavailableKind::Other,
            "the system gave no random bytes for a token",
        )
    })?;
    let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    let entry = TokenEntry {
        caller: Caller { name, scopes },
        created: now.replace_nanosecond(0).unwrap_or(now),
        hash: sha256(&token),
    };
    Ok(NewToken { token, entry })
}

/// `hash` signed with `key`.
fn tag(key: &hmac::Key, hash: &[u8; 32]) -> [u8; 32] {
    let mut out = [0_u8; 32];
    out.copy_from_slice(hmac::sign(key, hash).as_ref());
    out
}

/// Whether `a` and `b` are equal, in a time that does not depend on where
/// they differ (`subtle`'s comparison).
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.ct_eq(b).into()
}

fn sha256(token: &str) -> [u8; 32] {
    let mut out = [0_u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, token.as_bytes()).as_ref());
    out
}

/// The tokens a server accepts: each entry's hash, looked up in constant
/// time.
pub struct TokenTable {
    entries: Vec<TokenEntry>,
    /// Each entry's hash signed with `key`, in the order of `entries`,
    /// made once: a presented token costs one hash and one signature
    /// however many entries there are.
    tags: Vec<[u8; 32]>,
    /// A key of this process's: what is compared are signatures no caller
    /// can choose, each compared in constant time.
    key: hmac::Key,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .entries
            .iter()
            .map(|e| e.caller.name.as_str())
            .collect();
        f.debug_struct("TokenTable")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

impl TokenTable {
    /// A table of `entries`.
    ///
    /// # Errors
    /// `Unavailable` when the system has no randomness to give.
    pub fn new(entries: Vec<TokenEntry>) -> StoreResult<Self> {
        let key =
            hmac::Key::generate(hmac::HMAC_SHA256, &rand::SystemRandom::new()).map_err(|_| {
                StoreError::unavailable(
                    UnavailableKind::Other,
                    "the system gave no random bytes for the token table",
                )
            })?;
        let tags = entries.iter().map(|entry| tag(&key, &entry.hash)).collect();
        Ok(Self { entries, tags, key })
    }

    /// The caller `token` belongs to, if any. Every entry is compared, each
    /// in constant time, so the time taken says nothing about which
    /// entry, if any, is close.
    pub fn authenticate(&self, token: &str) -> Option<&Caller> {
        self.entry_of(token).map(|entry| &entry.caller)
    }

    /// The entry of `token`, if any, found as
    /// [`authenticate`](Self::authenticate) finds it.
    pub fn entry_of(&self, token: &str) -> Option<&TokenEntry> {
        let presented = tag(&self.key, &sha256(token));
        let mut found = None;
        for (entry, stored) in self.entries.iter().zip(&self.tags) {
            if same(&presented, stored) && found.is_none() {
                found = Some(entry);
            }
        }
        found
    }

    /// The first entry `matches` accepts. Every entry is offered, so the
    /// time taken says nothing about which one matched.
    pub fn find(&self, mut matches: impl FnMut(&TokenEntry) -> bool) -> Option<&TokenEntry> {
        let mut found = None;
        for entry in &self.entries {
            if matches(entry) && found.is_none() {
                found = Some(entry);
            }
        }
        found
    }

    /// How many tokens it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Reads the tokens file at `path`.
///
/// # Errors
/// `NotFound` when there is no file; `Unavailable` (of the I/O error's
/// kind) when it cannot be read; `Unavailable` of kind `Damaged` naming
/// the line that is not a token line.
pub fn read_file(path: &Path) -> StoreResult<Vec<TokenEntry>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound(format!(
                "there is no tokens file at {}; make a token with `lf-handoff token create NAME \
                 --scope agent --tokens {}`",
                path.display(),
                path.display()
            )))
        }
        Err(error) => return Err(io_error(path, "read", &error)),
    };
    let mut entries: Vec<TokenEntry> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let entry = parse_line(line).map_err(|why| {
            StoreError::damaged(format!(
                "tokens file {} line {}: {why}",
                path.display(),
                number + 1
            ))
        })?;
        if entries.iter().any(|e| e.caller.name == entry.caller.name) {
            return Err(StoreError::damaged(format!(
                "tokens file {} line {}: the name {:?} is given twice",
                path.display(),
                number + 1,
                entry.caller.name.as_str()
            )));
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn parse_line(line: &str) -> Result<TokenEntry, String> {
    let mut fields = line.splitn(4, '\t');
    let (Some(hash), Some(scopes), Some(created), Some(name)) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err("expected sha256:HASH, scopes, created and name, separated by tabs".into());
    };
    let hash = hash
        .strip_prefix(HASH_PREFIX)
        .and_then(hex::decode::<32>)
        .ok_or("the hash is not sha256: and 64 hex digits")?;
    let scopes = scopes
        .split(',')
        .map(|name| Scope::parse(name.trim()).ok_or(format!("{name:?} is not a scope")))
        .collect::<Result<Vec<_>, _>>()?;
    let created = OffsetDateTime::parse(created, &Rfc3339)
        .map_err(|e| format!("created {created:?} is not an RFC 3339 time ({e})"))?;
    let name = Actor::parse(name).map_err(|e| format!("name: {e}"))?;
    Ok(TokenEntry {
        caller: Caller { name, scopes },
        created,
        hash,
    })
}

/// Adds a token named `name` with `scopes` to the tokens file at `path`
/// (created, mode 0600, when missing) and returns it: the only time its
/// text is known.
///
/// # Errors
/// `InvalidInput` for a bad name or no scope; `Conflict` of kind
/// `AlreadyExists` when the file has a token of that name; `Unavailable`
/// when the file cannot be read or written, or is damaged.
pub fn create(
    path: &Path,
    name: &str,
    scopes: &[Scope],
    now: OffsetDateTime,
) -> StoreResult<NewToken> {
    let mut entries = match read_file(path) {
        Ok(entries) => entries,
        Err(StoreError::NotFound(_)) => Vec::new(),
        Err(error) => return Err(error),
    };
    let new = make_token(name, scopes, now)?;
    if entries
        .iter()
        .any(|e| e.caller.name == new.entry.caller.name)
    {
        return Err(StoreError::conflict(
            ConflictKind::AlreadyExists,
            format!(
                "{} already has a token named {name:?}; revoke it first or choose another name",
                path.display()
            ),
        ));
    }
    entries.push(new.entry.clone());
    write_file(path, &entries)?;
    Ok(new)
}

/// Removes the token named `name` from the tokens file at `path`.
///
/// # Errors
/// `NotFound` when the file or the name is not there; `Unavailable` when
/// the file cannot be read or written, or is damaged.
pub fn revoke(path: &Path, name: &str) -> StoreResult<TokenEntry> {
    let mut entries = read_file(path)?;
    let Some(index) = entries.iter().position(|e| e.caller.name.as_str() == name) else {
        return Err(StoreError::NotFound(format!(
            "{} has no token named {name:?}; `lf-handoff token list --tokens {}` shows them",
            path.display(),
            path.display()
        )));
    };
    let removed = entries.remove(index);
    write_file(path, &entries)?;
    Ok(removed)
}

/// Writes `entries` over the file at `path`: a temporary file beside it
/// (mode 0600), synced, renamed over it, and the directory synced.
fn write_file(path: &Path, entries: &[TokenEntry]) -> StoreResult<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut text = String::from(HEADER);
    text.push('\n');
    for entry in entries {
        text.push_str(&entry.line());
        text.push('\n');
    }
    // tempfile creates the file with mode 0600.
    let mut temporary =
        tempfile::NamedTempFile::new_in(&dir).map_err(|e| io_error(path, "write", &e))?;
    temporary
        .write_all(text.as_bytes())
        .and_then(|()| temporary.as_file().sync_all())
        .map_err(|e| io_error(path, "write", &e))?;
    temporary
        .persist(path)
        .map_err(|e| io_error(path, "replace", &e.error))?;
    // The rename is durable once the directory is synced.
    if let Ok(dir) = File::open(&dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Whether `path` is readable by others than its owner (a tokens file
/// should not be, though it holds only hashes).
pub fn is_shared(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|meta| meta.permissions().mode() & 0o077 != 0)
}

fn io_error(path: &Path, what: &str, error: &io::Error) -> StoreError {
    StoreError::unavailable(
        UnavailableKind::of_io_error(error),
        format!("cannot {what} the tokens file {}: {error}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn now() -> OffsetDateTime {
        time::macros::datetime!(2026-12-03 18:00:00 UTC)
    }

    #[test]
    fn a_token_is_random_and_only_its_hash_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let alice = create(&path, "alice", &[Scope::Person], now()).unwrap();
        let bot = create(&path, "bot@ci", &[Scope::Agent, Scope::Agent], now()).unwrap();
        assert!(alice.token.starts_with(TOKEN_PREFIX));
        assert_eq!(alice.token.len(), TOKEN_PREFIX.len() + 43);
        assert_ne!(alice.token, bot.token);
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&alice.token[TOKEN_PREFIX.len()..]));
        assert!(!is_shared(&path), "the file is 0600");

        let entries = read_file(&path).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].caller.scopes, vec![Scope::Agent]);
        let table = TokenTable::new(entries).unwrap();
        assert_eq!(
            table.authenticate(&alice.token).unwrap().name.as_str(),
            "alice"
        );
        assert_eq!(
            table.authenticate(&bot.token).unwrap().name.as_str(),
            "bot@ci"
        );
        assert!(table.authenticate("lfh_wrong").is_none());
        assert!(table.authenticate("").is_none());
    }

    #[test]
    fn every_token_of_a_large_table_finds_its_own_entry_and_no_other() {
        let made: Vec<NewToken> = (0..200)
            .map(|n| make_token(&format!("t{n}"), &[Scope::Agent], now()).unwrap())
            .collect();
        let table = TokenTable::new(made.iter().map(|m| m.entry.clone()).collect()).unwrap();
        for (n, new) in made.iter().enumerate() {
            let caller = table.authenticate(&new.token).unwrap();
            assert_eq!(caller.name.as_str(), format!("t{n}"));
            // One character off is nobody's.
            let mut near = new.token.clone();
            let last = if near.ends_with('A') { "B" } else { "A" };
            near.replace_range(near.len() - 1.., last);
            assert!(table.authenticate(&near).is_none(), "{n}");
        }
        assert!(same(&[7; 32], &[7; 32]));
        let mut other = [7; 32];
        other[31] = 8;
        assert!(!same(&[7; 32], &other));
    }

    #[test]
    fn names_are_unique_and_revoking_removes_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let first = create(&path, "alice", &[Scope::Person], now()).unwrap();
        let again = create(&path, "alice", &[Scope::Operator], now()).unwrap_err();
        assert_eq!(again.conflict_kind(), Some(ConflictKind::AlreadyExists));
        assert!(create(&path, " ", &[Scope::Person], now())
            .unwrap_err()
            .is_invalid_input());
        assert!(create(&path, "a\nb", &[Scope::Person], now())
            .unwrap_err()
            .is_invalid_input());
        assert!(create(&path, "x", &[], now())
            .unwrap_err()
            .is_invalid_input());
        let removed = revoke(&path, "alice").unwrap();
        assert_eq!(removed.caller.name.as_str(), "alice");
        let table = TokenTable::new(read_file(&path).unwrap()).unwrap();
        assert!(table.authenticate(&first.token).is_none());
        assert!(revoke(&path, "alice").unwrap_err().is_not_found());
    }

    #[test]
    fn a_damaged_file_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        assert!(read_file(&path).unwrap_err().is_not_found());
        for bad in [
            "nonsense",
            "sha256:00\tagent\t2026-01-01T00:00:00Z\tx",
            &format!("sha256:{}\tgod\t2026-01-01T00:00:00Z\tx", "0".repeat(64)),
            &format!("sha256:{}\tagent\tyesterday\tx", "0".repeat(64)),
        ] {
            fs::write(&path, format!("# header\n\n{bad}\n")).unwrap();
            let error = read_file(&path).unwrap_err();
            assert_eq!(
                error.unavailable_kind(),
                Some(UnavailableKind::Damaged),
                "{bad}"
            );
            assert!(error.message().contains("line 3"), "{error}");
        }
    }
}
