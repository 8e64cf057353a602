//! Signed links a person can act on (contract C21), and the secret that
//! signs them.
//!
//! A link is `/h/{id}?for=NAME&exp=UNIX_SECONDS&sig=SIGNATURE`: the
//! signature is HMAC-SHA256, keyed with the link secret, over
//!
//! ```text
//! lf-handoff link v1 LF {id} LF {for} LF {exp}
//! ```
//!
//! (LF a newline; neither an id nor a name may hold one, so the message is
//! unambiguous), in base64url without padding. A link a token made adds
//! `LF by {mark}`; a one-tap link of a notification (C26) names the
//! choice it picks, `&choice=VALUE`, and adds `LF choice {value}` (a
//! choice's value is one word), so a changed choice breaks the signature. The name the link was made
//! for is signed too, because the link's holder is recorded as the actor
//! `link:NAME` of what they do with it. A link is refused when its
//! signature does not verify (a wrong or rotated secret, any changed
//! field) or when its time has passed; comparisons are constant-time
//! (`ring::hmac::verify`).
//!
//! The secret is 32 random bytes kept as 64 hex digits on one line of a
//! file the server creates with mode 0600 ([`LinkSecret::load_or_create`]);
//! a file others can read is refused. Rotating the secret (replacing the
//! file, e.g. deleting it and restarting or reloading) invalidates every
//! link made with the old one.
//!
//! The same secret keys the inbox's anti-forgery tokens
//! ([`LinkSecret::form_token`]), under a different message prefix, so a
//! link's signature is never a valid form token or the other way round.

use std::fs;
use std::io::{self, Write as _};
use std::path::Path;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use lf_handoff_adapters::{StoreError, StoreResult, UnavailableKind};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Actor, Choice};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use time::OffsetDateTime;

use crate::hex;

/// What the actor of a change made through a link starts with.
pub const LINK_ACTOR_PREFIX: &str = "link:";

/// How long a link is valid when the handoff has no deadline and no time
/// is asked for.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest a link lives (C29): a `valid_for` beyond it is refused,
/// and a deadline further away than it is not waited for.
pub const MAX_VALIDITY: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// How many random bytes a secret holds (256 bits).
const SECRET_BYTES: usize = 32;

/// What every signed link message starts with.
const LINK_DOMAIN: &str = "lf-handoff link v1";

/// What every anti-forgery message starts with.
const FORM_DOMAIN: &str = "lf-handoff form v1";

/// What a sign-in's tag signs, so it cannot pass for a link's or a form's.
const SESSION_DOMAIN: &str = "lf-handoff session v1";

/// How long a sign-in lasts (the cookie's `Max-Age`, and the expiry it
/// carries).
pub const SESSION_VALIDITY: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The key that signs links and anti-forgery tokens. Its bytes are never
/// shown (its `Debug` says only that it is a secret).
pub struct LinkSecret {
    key: hmac::Key,
}

impl std::fmt::Debug for LinkSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkSecret(..)")
    }
}

impl LinkSecret {
    /// A secret of these bytes (at least 32).
    ///
    /// # Errors
    /// `InvalidInput` for fewer than 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> StoreResult<Self> {
        if bytes.len() < SECRET_BYTES {
            return Err(StoreError::InvalidInput(format!(
                "a link secret needs at least {SECRET_BYTES} bytes; this one has {}",
                bytes.len()
            )));
        }
        Ok(Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, bytes),
        })
    }

    /// A new random secret, kept nowhere (a run without a secret file:
    /// its links end with the process).
    ///
    /// # Errors
    /// `Unavailable` when the system has no randomness to give.
    pub fn random() -> StoreResult<Self> {
        Self::from_bytes(&random_bytes()?)
    }

    /// The secret in the file at `path`; when there is no file, a new
    /// random secret written there first (mode 0600, created only if
    /// still missing, so two servers starting at once agree).
    ///
    /// # Errors
    /// `InvalidInput` for a file others than its owner may read, or one
    /// that does not hold 64 hex digits; `Unavailable` when it cannot be
    /// read or written.
    pub fn load_or_create(path: &Path) -> StoreResult<Self> {
        match fs::read_to_string(path) {
            Ok(text) => Self::parse_file(path, &text),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let bytes = random_bytes()?;
                match write_new(path, &hex::encode(&bytes)) {
                    Ok(()) => Self::from_bytes(&bytes),
                    // Another process made it first: use theirs.
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                        let text = fs::read_to_string(path).map_err(|e| io_error(path, &e))?;
                        Self::parse_file(path, &text)
                    }
                    Err(error) => Err(io_error(path, &error)),
                }
            }
            Err(error) => Err(io_error(path, &error)),
        }
    }

    /// The secret in the file at `path`, which must exist (what `lf-handoff
    /// link` reads: it never makes a secret no server uses).
    ///
    /// # Errors
    /// `NotFound` when there is no file; otherwise as
    /// [`load_or_create`](Self::load_or_create).
    pub fn load(path: &Path) -> StoreResult<Self> {
        match fs::read_to_string(path) {
            Ok(text) => Self::parse_file(path, &text),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Err(StoreError::NotFound(format!(
                    "there is no link secret at {}; `lf-handoff serve` makes it (--link-secret \
                     FILE, or link-secret beside its --tokens file)",
                    path.display()
                )))
            }
            Err(error) => Err(io_error(path, &error)),
        }
    }

    fn parse_file(path: &Path, text: &str) -> StoreResult<Self> {
        if crate::tokens::is_shared(path) {
            return Err(StoreError::InvalidInput(format!(
                "the link secret {} may be read by others than its owner; make it private \
                 (chmod 600 {}), or delete it to make a new one (every link made with it stops \
                 working)",
                path.display(),
                path.display()
            )));
        }
        let bytes = hex::decode::<SECRET_BYTES>(text.trim()).ok_or_else(|| {
            StoreError::InvalidInput(format!(
                "the link secret {} does not hold 64 hex digits; delete it to make a new one \
                 (every link made with it stops working)",
                path.display()
            ))
        })?;
        Self::from_bytes(&bytes)
    }

    /// A link to handoff `id` for the person `holder`, valid until
    /// `expires` (cut to whole seconds).
    ///
    /// # Errors
    /// `InvalidInput` when `link:` and `holder` is not a valid actor name
    /// (blank, a control character, over 200 bytes).
    pub fn sign(
        &self,
        id: &InteractiveHandoffId,
        holder: &str,
        expires: OffsetDateTime,
    ) -> StoreResult<SignedLink> {
        self.sign_by(id, holder, expires, None)
    }

    /// [`sign`](Self::sign), for a link a token makes: `maker` is that
    /// token's stored hash, whose [`maker_mark`] the link carries (`by`)
    /// and signs, so the link stops working once the token is revoked.
    ///
    /// # Errors
    /// As [`sign`](Self::sign).
    pub fn sign_by(
        &self,
        id: &InteractiveHandoffId,
        holder: &str,
        expires: OffsetDateTime,
        maker: Option<&[u8]>,
    ) -> StoreResult<SignedLink> {
        self.sign_choice(id, holder, expires, maker, None)
    }

    /// [`sign_by`](Self::sign_by), for a one-tap link (C26) that picks
    /// `choice`, a value of the handoff's choices: the link signs it, and
    /// its page offers that choice alone to confirm.
    ///
    /// # Errors
    /// As [`sign`](Self::sign); `InvalidInput` for a choice that is no
    /// choice value (empty, or other than letters, digits and `. _ : @ -`).
    pub fn sign_choice(
        &self,
        id: &InteractiveHandoffId,
        holder: &str,
        expires: OffsetDateTime,
        maker: Option<&[u8]>,
        choice: Option<&str>,
    ) -> StoreResult<SignedLink> {
        let actor = link_actor(holder)?;
        if let Some(choice) = choice {
            Choice::parse(choice).map_err(StoreError::from)?;
        }
        let expires = expires.unix_timestamp();
        let by = maker.map(maker_mark);
        let tag = hmac::sign(
            &self.key,
            link_message(id.as_str(), holder, expires, by.as_deref(), choice).as_bytes(),
        );
        Ok(SignedLink {
            id: id.clone(),
            holder: holder.to_string(),
            actor,
            expires,
            by,
            choice: choice.map(str::to_string),
            signature: URL_SAFE_NO_PAD.encode(tag.as_ref()),
        })
    }

    /// What the link `/h/{id}?{query}` grants at `now`.
    ///
    /// # Errors
    /// [`LinkRefusal`]: a query without its three fields, a signature that
    /// does not verify, or a time that has passed. The signature is
    /// checked first, so an expired link says so only when it is genuine.
    pub fn verify(
        &self,
        id: &str,
        query: &str,
        now: OffsetDateTime,
    ) -> Result<LinkGrant, LinkRefusal> {
        let (mut holder, mut expires, mut signature, mut by) = (None, None, None, None);
        let mut choice = None;
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let slot = match key.as_ref() {
                "for" => &mut holder,
                "exp" => &mut expires,
                "sig" => &mut signature,
                "by" => &mut by,
                "choice" => &mut choice,
                _ => continue,
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(LinkRefusal::Malformed(format!("{key} is given twice")));
            }
        }
        let (Some(holder), Some(expires), Some(signature)) = (holder, expires, signature) else {
            return Err(LinkRefusal::Malformed(
                "a link carries for, exp and sig".into(),
            ));
        };
        let expires: i64 = expires
            .parse()
            .map_err(|_| LinkRefusal::Malformed("exp is not a whole number of seconds".into()))?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature.as_bytes())
            .map_err(|_| LinkRefusal::BadSignature)?;
        hmac::verify(
            &self.key,
            link_message(id, &holder, expires, by.as_deref(), choice.as_deref()).as_bytes(),
            &signature,
        )
        .map_err(|_| LinkRefusal::BadSignature)?;
        let id = InteractiveHandoffId::parse(id).map_err(|_| LinkRefusal::BadSignature)?;
        let actor = link_actor(&holder).map_err(|_| LinkRefusal::BadSignature)?;
        let expires_at = OffsetDateTime::from_unix_timestamp(expires)
            .map_err(|_| LinkRefusal::Malformed("exp is out of range".into()))?;
        if now.unix_timestamp() >= expires {
            return Err(LinkRefusal::Expired(expires_at));
        }
        // A genuine link made to live longer than a link may (signed with
        // the secret file by hand, or before the limit) is not honoured.
        if expires_at > now.saturating_add(seconds(MAX_VALIDITY)) {
            return Err(LinkRefusal::TooLong(expires_at));
        }
        Ok(LinkGrant {
            id,
            holder,
            actor,
            expires: expires_at,
            by,
            choice,
        })
    }

    /// The sign-in cookie's value for the token whose stored hash is
    /// `token_hash`, until `expires` (Unix seconds), for the sign-in
    /// `nonce` (random, so that each sign-in is one of its own, which a
    /// sign-out ends alone): `s2.EXPIRES.NONCE.TAG`, where `TAG` signs
    /// the hash, the expiry and the nonce. It holds no token: a cookie that
    /// leaks gives no bearer token, stops at its expiry, at its sign-out,
    /// and as soon as the token is revoked (its hash is gone).
    pub fn session_value(&self, token_hash: &[u8], expires: i64, nonce: &[u8]) -> String {
        let tag = hmac::sign(&self.key, &session_message(token_hash, expires, nonce));
        format!(
            "s2.{expires}.{}.{}",
            URL_SAFE_NO_PAD.encode(nonce),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// Whether `session` (a parsed cookie) is a sign-in of the token whose
    /// stored hash is `token_hash`, compared in constant time.
    pub fn check_session(&self, session: &SessionValue, token_hash: &[u8]) -> bool {
        hmac::verify(
            &self.key,
            &session_message(token_hash, session.expires, &session.nonce),
            &session.tag,
        )
        .is_ok()
    }

    /// The anti-forgery token of the session whose cookie is `session`:
    /// what every form of the inbox carries and every POST must send back.
    pub fn form_token(&self, session: &str) -> String {
        let tag = hmac::sign(&self.key, format!("{FORM_DOMAIN}\n{session}").as_bytes());
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    }

    /// Whether `presented` is the anti-forgery token of `session`,
    /// compared in constant time.
    pub fn check_form_token(&self, session: &str, presented: &str) -> bool {
        let Ok(presented) = URL_SAFE_NO_PAD.decode(presented.as_bytes()) else {
            return false;
        };
        hmac::verify(
            &self.key,
            format!("{FORM_DOMAIN}\n{session}").as_bytes(),
            &presented,
        )
        .is_ok()
    }
}

/// A sign-in cookie's value, read: when it expires and its tag. Its
/// `Debug` hides the tag, which is the sign-in.
pub struct SessionValue {
    /// Unix seconds.
    pub expires: i64,
    nonce: Vec<u8>,
    tag: Vec<u8>,
}

impl std::fmt::Debug for SessionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionValue")
            .field("expires", &self.expires)
            .field("nonce", &"<redacted>")
            .field("tag", &"<redacted>")
            .finish()
    }
}

impl SessionValue {
    /// The store's key for this sign-in's sign-out (C29): a hash of its
    /// nonce, which names the sign-in whatever text carried it, and gives
    /// the store nothing to sign in with.
    pub fn revocation_key(&self) -> String {
        let mut message = format!("{SESSION_DOMAIN}\nsign-out\n").into_bytes();
        message.extend_from_slice(&self.nonce);
        let digest = ring::digest::digest(&ring::digest::SHA256, &message);
        format!("session:{}", hex::encode(digest.as_ref()))
    }

    /// Reads `s2.EXPIRES.NONCE.TAG`; `None` for anything else (the nonce-less
    /// `s1.` sign-ins of earlier releases included: their person signs in
    /// again), or one that has expired at `now`.
    pub fn parse(value: &str, now: OffsetDateTime) -> Option<Self> {
        let rest = value.strip_prefix("s2.")?;
        let (expires, rest) = rest.split_once('.')?;
        let (nonce, tag) = rest.split_once('.')?;
        // One spelling per sign-in: no sign, no leading zero, so that no
        // other text of a signed-out cookie passes for a sign-in.
        if expires.len() > 20
            || expires.starts_with('0')
            || !expires.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let expires: i64 = expires.parse().ok()?;
        if expires <= now.unix_timestamp() {
            return None;
        }
        let nonce = URL_SAFE_NO_PAD.decode(nonce.as_bytes()).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag.as_bytes()).ok()?;
        Some(Self {
            expires,
            nonce,
            tag,
        })
    }
}

fn session_message(token_hash: &[u8], expires: i64, nonce: &[u8]) -> Vec<u8> {
    // The nonce's length first, so no (nonce, hash) pair reads as another.
    let mut message = format!("{SESSION_DOMAIN}\n{expires}\n{}\n", nonce.len()).into_bytes();
    message.extend_from_slice(nonce);
    message.extend_from_slice(token_hash);
    message
}

/// When a link made at `now` stops working: `now + valid_for` when asked,
/// else the handoff's `deadline` when it has one still ahead, else
/// [`DEFAULT_VALIDITY`] from now; never later than [`MAX_VALIDITY`] from
/// now, so a deadline further away than that is not waited for.
///
/// # Errors
/// `InvalidInput` for a `valid_for` over [`MAX_VALIDITY`], naming the
/// limit: a link that lives longer is not made.
pub fn link_expiry(
    deadline: Option<OffsetDateTime>,
    now: OffsetDateTime,
    valid_for: Option<Duration>,
) -> StoreResult<OffsetDateTime> {
    let latest = now.saturating_add(seconds(MAX_VALIDITY));
    match (valid_for, deadline) {
        (Some(valid_for), _) if valid_for > MAX_VALIDITY => Err(StoreError::InvalidInput(format!(
            "valid_for: a link lives at most {days} days; ask for {days}d or less",
            days = MAX_VALIDITY.as_secs() / 86_400
        ))),
        (Some(valid_for), _) => Ok(now.saturating_add(time::Duration::saturating_seconds_f64(
            valid_for.as_secs_f64(),
        ))),
        (None, Some(deadline)) if deadline > now => Ok(deadline.min(latest)),
        _ => Ok(now.saturating_add(seconds(DEFAULT_VALIDITY))),
    }
}

/// `span` as a `time` duration, saturating.
fn seconds(span: Duration) -> time::Duration {
    time::Duration::seconds(i64::try_from(span.as_secs()).unwrap_or(i64::MAX))
}

/// A signed link. Its `Debug` leaves the signature out: whoever holds
/// the signature holds the link.
#[derive(Clone, PartialEq, Eq)]
pub struct SignedLink {
    /// The handoff.
    pub id: InteractiveHandoffId,
    /// The name it was made for.
    pub holder: String,
    /// The actor of what is done with it: `link:` and the name.
    pub actor: Actor,
    /// When it stops working, in Unix seconds.
    pub expires: i64,
    /// The [`maker_mark`] of the token that made it, if a token did.
    pub by: Option<String>,
    /// The choice a one-tap link picks (C26).
    pub choice: Option<String>,
    signature: String,
}

impl std::fmt::Debug for SignedLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedLink")
            .field("id", &self.id)
            .field("holder", &self.holder)
            .field("expires", &self.expires)
            .field("choice", &self.choice)
            .field("signature", &"<redacted>")
            .finish()
    }
}

impl SignedLink {
    /// The path and query: `/h/{id}?for=...&exp=...&sig=...`.
    pub fn path(&self) -> String {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("for", &self.holder)
            .append_pair("exp", &self.expires.to_string())
            .extend_pairs(self.by.as_deref().map(|by| ("by", by)))
            .extend_pairs(self.choice.as_deref().map(|choice| ("choice", choice)))
            .append_pair("sig", &self.signature)
            .finish();
        format!("/h/{}?{query}", self.id.as_str())
    }

    /// The absolute URL under `base` (`https://host:port`, no trailing
    /// slash needed).
    pub fn url(&self, base: &str) -> String {
        format!("{}{}", base.trim_end_matches('/'), self.path())
    }
}

/// What a verified link grants: acting on one handoff, as `link:NAME`,
/// until a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkGrant {
    /// The handoff.
    pub id: InteractiveHandoffId,
    /// The name the link was made for.
    pub holder: String,
    /// `link:` and the name: the actor of what is done with it.
    pub actor: Actor,
    /// When it stops working.
    pub expires: OffsetDateTime,
    /// The [`maker_mark`] of the token that made it, if a token did: the
    /// link works only while a person's token of that mark and the
    /// holder's name is accepted.
    pub by: Option<String>,
    /// The choice a one-tap link picks (C26): its page offers that
    /// choice alone, and its form completes with it.
    pub choice: Option<String>,
}

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRefusal {
    /// The query lacks a field, or one is not of its form.
    Malformed(String),
    /// The signature does not verify: the link was changed, or made with
    /// another (or a rotated) secret.
    BadSignature,
    /// A genuine link whose time has passed (at this time).
    Expired(OffsetDateTime),
    /// A genuine link that lives longer than [`MAX_VALIDITY`] from now.
    TooLong(OffsetDateTime),
    /// A genuine link whose maker's token was revoked.
    MakerRevoked,
}

impl std::fmt::Display for LinkRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(why) => write!(f, "this is not a whole link: {why}"),
            Self::BadSignature => f.write_str(
                "this link's signature is not valid: it was changed, or the service's link \
                 secret has been rotated since it was made",
            ),
            Self::Expired(at) => write!(f, "this link expired at {}", crate::links::rfc3339(*at)),
            Self::TooLong(at) => write!(
                f,
                "this link lives until {}, longer than the {} days a link may; ask for a new one",
                crate::links::rfc3339(*at),
                MAX_VALIDITY.as_secs() / 86_400
            ),
            Self::MakerRevoked => f.write_str(
                "the token that made this link was revoked, and its links with it; ask for a \
                 new one",
            ),
        }
    }
}

/// `time` as RFC 3339, or its Unix seconds if it cannot be written so.
pub(crate) fn rfc3339(time: OffsetDateTime) -> String {
    time.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| time.unix_timestamp().to_string())
}

pub(crate) fn link_actor(holder: &str) -> StoreResult<Actor> {
    if holder.contains(['\n', '\r']) || holder.trim().is_empty() {
        return Err(StoreError::InvalidInput(
            "a link's name must not be blank or hold a line break".into(),
        ));
    }
    Actor::parse(&format!("{LINK_ACTOR_PREFIX}{holder}"))
        .map_err(|e| StoreError::InvalidInput(format!("the link's name: {e}")))
}

fn link_message(
    id: &str,
    holder: &str,
    expires: i64,
    by: Option<&str>,
    choice: Option<&str>,
) -> String {
    let mut message = format!("{LINK_DOMAIN}\n{id}\n{holder}\n{expires}");
    if let Some(by) = by {
        message.push_str(&format!("\nby {by}"));
    }
    if let Some(choice) = choice {
        message.push_str(&format!("\nchoice {choice}"));
    }
    message
}

/// What a link made by a token carries of it: the first 8 bytes of the
/// token's stored hash (itself a SHA-256 of the token), in hex; enough to
/// tell the token apart, nothing to act with.
pub fn maker_mark(token_hash: &[u8]) -> String {
    hex::encode(token_hash.get(..8).unwrap_or(token_hash))
}

fn random_bytes() -> StoreResult<[u8; SECRET_BYTES]> {
    let mut bytes = [0_u8; SECRET_BYTES];
    SystemRandom::new().fill(&mut bytes).map_err(|_| {
        StoreError::unavailable(
            UnavailableKind::Other,
            "the system gave no random bytes for the link secret",
        )
    })?;
    Ok(bytes)
}

/// Creates `path` with mode 0600 and `text` in it; fails with
/// `AlreadyExists` when it is there.
fn write_new(path: &Path, text: &str) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(format!("{text}\n").as_bytes())?;
    file.sync_all()
}

fn io_error(path: &Path, error: &io::Error) -> StoreError {
    StoreError::unavailable(
        UnavailableKind::of_io_error(error),
        format!(
            "cannot read or write the link secret {}: {error}",
            path.display()
        ),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    const ID: &str = "ih_0b4f3c2a-6e1d-4c3b-9a8f-2d1e0c9b8a7f";

    fn now() -> OffsetDateTime {
        time::macros::datetime!(2026-12-03 18:00:00 UTC)
    }

    fn id() -> InteractiveHandoffId {
        InteractiveHandoffId::parse(ID).unwrap()
    }

    fn query(link: &SignedLink) -> String {
        link.path().split_once('?').unwrap().1.to_string()
    }

    #[test]
    fn a_link_verifies_until_it_expires_and_names_its_holder() {
        let secret = LinkSecret::random().unwrap();
        let expires = now() + time::Duration::hours(1);
        let link = secret.sign(&id(), "alice & bob", expires).unwrap();
        assert!(link
            .path()
            .starts_with(&format!("/h/{ID}?for=alice+%26+bob&exp=")));
        assert_eq!(
            link.url("https://inbox.example/"),
            format!("https://inbox.example{}", link.path())
        );
        let grant = secret.verify(ID, &query(&link), now()).unwrap();
        assert_eq!(grant.id, id());
        assert_eq!(grant.holder, "alice & bob");
        assert_eq!(grant.actor.as_str(), "link:alice & bob");
        assert_eq!(grant.expires, expires);
        assert_eq!(
            secret.verify(ID, &query(&link), expires),
            Err(LinkRefusal::Expired(expires))
        );
    }

    #[test]
    fn a_changed_link_or_another_secret_is_refused() {
        let secret = LinkSecret::random().unwrap();
        let link = secret
            .sign(&id(), "alice", now() + time::Duration::hours(1))
            .unwrap();
        let good = query(&link);
        let other_id = "ih_1b4f3c2a-6e1d-4c3b-9a8f-2d1e0c9b8a7f";
        assert_eq!(
            secret.verify(other_id, &good, now()),
            Err(LinkRefusal::BadSignature)
        );
        let later = good.replace(
            &format!("exp={}", link.expires),
            &format!("exp={}", link.expires + 3600),
        );
        assert_eq!(
            secret.verify(ID, &later, now()),
            Err(LinkRefusal::BadSignature)
        );
        let mallory = good.replace("for=alice", "for=mallory");
        assert_eq!(
            secret.verify(ID, &mallory, now()),
            Err(LinkRefusal::BadSignature)
        );
        // A rotated secret invalidates every link.
        let rotated = LinkSecret::random().unwrap();
        assert_eq!(
            rotated.verify(ID, &good, now()),
            Err(LinkRefusal::BadSignature)
        );
        // An expired and tampered link is refused for its signature.
        assert_eq!(
            secret.verify(ID, &later, now() + time::Duration::days(9)),
            Err(LinkRefusal::BadSignature)
        );
        for broken in [
            "",
            "for=alice",
            &format!("{good}&sig=x"),
            &good.replace("exp=", "exp=x"),
            &good.replace("sig=", "sig=%%%"),
        ] {
            assert!(secret.verify(ID, broken, now()).is_err(), "{broken}");
        }
    }

    #[test]
    fn a_one_tap_link_signs_its_choice() {
        let secret = LinkSecret::random().unwrap();
        let until = now() + time::Duration::hours(1);
        let link = secret
            .sign_choice(&id(), "alice", until, None, Some("allow"))
            .unwrap();
        let good = query(&link);
        assert!(good.contains("choice=allow"), "{good}");
        let grant = secret.verify(ID, &good, now()).unwrap();
        assert_eq!(grant.choice.as_deref(), Some("allow"));
        for forged in [
            good.replace("choice=allow", "choice=deny"),
            good.replace("choice=allow&", ""),
            query(&secret.sign(&id(), "alice", until).unwrap()) + "&choice=allow",
        ] {
            assert_eq!(
                secret.verify(ID, &forged, now()),
                Err(LinkRefusal::BadSignature),
                "{forged}"
            );
        }
        assert!(secret
            .sign_choice(&id(), "alice", until, None, Some("a b"))
            .unwrap_err()
            .is_invalid_input());
    }

    #[test]
    fn a_name_that_is_no_actor_is_refused() {
        let secret = LinkSecret::random().unwrap();
        let until = now() + time::Duration::hours(1);
        for bad in [" ", "a\nb", "a\u{7}", &"x".repeat(200)] {
            assert!(secret
                .sign(&id(), bad, until)
                .unwrap_err()
                .is_invalid_input());
        }
    }

    #[test]
    fn the_secret_file_is_made_private_and_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("link-secret");
        let first = LinkSecret::load_or_create(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let link = first
            .sign(&id(), "alice", now() + time::Duration::hours(1))
            .unwrap();
        let again = LinkSecret::load_or_create(&path).unwrap();
        assert!(again.verify(ID, &query(&link), now()).is_ok());
        let read = LinkSecret::load(&path).unwrap();
        assert!(read.verify(ID, &query(&link), now()).is_ok());
        assert!(LinkSecret::load(&dir.path().join("none"))
            .unwrap_err()
            .is_not_found());

        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let shared = LinkSecret::load_or_create(&path).unwrap_err();
        assert!(shared.is_invalid_input(), "{shared}");
        assert!(shared.message().contains("chmod 600"), "{shared}");

        fs::write(&path, "not hex\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(LinkSecret::load_or_create(&path)
            .unwrap_err()
            .is_invalid_input());

        // Rotation: a new file, and the old links stop working.
        fs::remove_file(&path).unwrap();
        let rotated = LinkSecret::load_or_create(&path).unwrap();
        assert_eq!(
            rotated.verify(ID, &query(&link), now()),
            Err(LinkRefusal::BadSignature)
        );
        assert!(LinkSecret::from_bytes(&[0; 16]).is_err());
    }

    #[test]
    fn form_tokens_belong_to_their_session() {
        let secret = LinkSecret::random().unwrap();
        let token = secret.form_token("session-a");
        assert!(secret.check_form_token("session-a", &token));
        assert!(!secret.check_form_token("session-b", &token));
        assert!(!secret.check_form_token("session-a", ""));
        assert!(!secret.check_form_token("session-a", "%%"));
        assert!(!LinkSecret::random()
            .unwrap()
            .check_form_token("session-a", &token));
    }

    #[test]
    fn a_sign_in_names_its_token_until_it_expires() {
        let secret = LinkSecret::random().unwrap();
        let (hash, other) = ([7_u8; 32], [8_u8; 32]);
        let expires = (now() + time::Duration::days(7)).unix_timestamp();
        let value = secret.session_value(&hash, expires, b"nonce-1");
        assert!(value.starts_with(&format!("s2.{expires}.")), "{value}");
        assert_ne!(
            value,
            secret.session_value(&hash, expires, b"nonce-2"),
            "each sign-in is its own"
        );
        let read = SessionValue::parse(&value, now()).unwrap();
        assert_eq!(read.expires, expires);
        assert!(secret.check_session(&read, &hash));
        assert!(!secret.check_session(&read, &other), "another token");
        assert!(!LinkSecret::random().unwrap().check_session(&read, &hash));
        // A second before its expiry, and at it.
        let before = OffsetDateTime::from_unix_timestamp(expires - 1).unwrap();
        assert!(SessionValue::parse(&value, before).is_some());
        let at = OffsetDateTime::from_unix_timestamp(expires).unwrap();
        assert!(SessionValue::parse(&value, at).is_none());
        // Another expiry under the same tag.
        let moved = value.replace(&expires.to_string(), &(expires + 60).to_string());
        assert!(!secret.check_session(&SessionValue::parse(&moved, now()).unwrap(), &hash));
        for bad in [
            "",
            "s1.",
            "s1.x.AAAA",
            "s1.-5.AAAA",
            "s1.99999999999999999999999.AAAA",
            "s2.99999999999.AAAA",
            "s1.99999999999.AAAA.AAAA",
            "s2.99999999999.%%.AAAA",
            "s2.99999999999.AAAA.%%",
            "lfh_sometoken",
        ] {
            assert!(SessionValue::parse(bad, now()).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_link_lasts_until_the_deadline_or_a_day() {
        let deadline = now() + time::Duration::hours(3);
        assert_eq!(link_expiry(Some(deadline), now(), None).unwrap(), deadline);
        assert_eq!(
            link_expiry(None, now(), None).unwrap(),
            now() + time::Duration::hours(24)
        );
        assert_eq!(
            link_expiry(Some(deadline), now(), Some(Duration::from_secs(60))).unwrap(),
            now() + time::Duration::minutes(1)
        );
        // A deadline already passed: a day, so the outcome can be seen.
        assert_eq!(
            link_expiry(Some(now()), now(), None).unwrap(),
            now() + time::Duration::hours(24)
        );
    }

    #[test]
    fn a_link_lives_at_most_thirty_days() {
        let month = now() + time::Duration::days(30);
        assert_eq!(link_expiry(None, now(), Some(MAX_VALIDITY)).unwrap(), month);
        let longer =
            link_expiry(None, now(), Some(MAX_VALIDITY + Duration::from_secs(1))).unwrap_err();
        assert!(longer.is_invalid_input(), "{longer}");
        assert!(longer.message().contains("30 days"), "{longer}");
        // A deadline further away is not waited for.
        let far = now() + time::Duration::days(90);
        assert_eq!(link_expiry(Some(far), now(), None).unwrap(), month);
        // A link signed to live longer is not honoured.
        let secret = LinkSecret::random().unwrap();
        let long = secret.sign(&id(), "alice", far).unwrap();
        assert_eq!(
            secret.verify(ID, &query(&long), now()),
            Err(LinkRefusal::TooLong(far))
        );
        let fits = secret.sign(&id(), "alice", month).unwrap();
        assert!(secret.verify(ID, &query(&fits), now()).is_ok());
    }

    #[test]
    fn a_signed_links_debug_hides_its_signature() {
        let secret = LinkSecret::random().unwrap();
        let link = secret
            .sign(&id(), "alice", now() + time::Duration::hours(1))
            .unwrap();
        let signature = query(&link).rsplit_once("sig=").unwrap().1.to_string();
        let shown = format!("{link:?} {secret:?}");
        assert!(!shown.contains(&signature), "{shown}");
        assert!(
            shown.contains("alice") && shown.contains("<redacted>"),
            "{shown}"
        );
    }
}
