//! How a hook asks: how long it waits, the handoff's deadline, what the
//! deadline answers, and which parent it opens under. Flags of `lf-handoff
//! hook` win over the environment, the environment over the defaults.

use std::time::Duration;

use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;

use crate::input::HookError;

/// The parent to open handoffs under, instead of the session's own wave.
pub const PARENT_ENV: &str = "LF_HANDOFF_PARENT";
/// How long a permission hook waits for a person.
pub const WAIT_ENV: &str = "LF_HANDOFF_HOOK_WAIT";
/// The deadline of the handoffs a hook opens (`never`: none).
pub const EXPIRES_IN_ENV: &str = "LF_HANDOFF_HOOK_EXPIRES_IN";
/// What a permission handoff answers at its deadline: `allow`, `deny` or
/// `none`.
pub const ON_EXPIRY_ENV: &str = "LF_HANDOFF_HOOK_ON_EXPIRY";

/// The default wait: below the 60 s hook timeout `hook install` writes,
/// with 10 s left to open the store, answer and exit.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(50);
/// The default deadline of a handoff a hook opens.
pub const DEFAULT_EXPIRES_IN: Duration = Duration::from_secs(3600);
/// The longest wait accepted: the agents' own default hook timeout (600 s)
/// less 10 s.
pub const MAX_WAIT: Duration = Duration::from_secs(590);

/// A person's choice on a permission handoff, or what its deadline
/// answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behavior {
    /// The tool may run.
    Allow,
    /// The tool may not run.
    Deny,
}

impl Behavior {
    /// `allow` or `deny`: the choice values of a permission handoff.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    /// The inverse of [`as_str`](Self::as_str).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            _ => None,
        }
    }
}

/// How the hook asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// How long a permission hook waits for the answer before it leaves
    /// the decision to the agent's own prompt.
    pub wait: Duration,
    /// The deadline of each handoff, from its opening; `None`: none.
    pub expires_in: Option<Duration>,
    /// What a permission handoff answers when its deadline passes.
    pub on_expiry: Option<Behavior>,
    /// The parent to open under; `None`: the session's own wave.
    pub parent: Option<InteractiveHandoffParent>,
}

impl Default for HookConfig {
    fn default() -> Self {
        Self {
            wait: DEFAULT_WAIT,
            expires_in: Some(DEFAULT_EXPIRES_IN),
            on_expiry: None,
            parent: None,
        }
    }
}

/// What the command line gave, each overriding its variable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookFlags {
    /// `--wait`.
    pub wait: Option<String>,
    /// `--expires-in`.
    pub expires_in: Option<String>,
    /// `--on-expiry`.
    pub on_expiry: Option<String>,
    /// `--parent`.
    pub parent: Option<String>,
}

impl HookConfig {
    /// The configuration from `flags`, then the variables `lookup` reads
    /// (empty values count as unset), then the defaults.
    ///
    /// # Errors
    /// A [`HookError`] naming the flag or variable that does not parse.
    pub fn resolve(
        flags: &HookFlags,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, HookError> {
        let pick = |flag: &Option<String>, name: &'static str| {
            flag.clone()
                .map(|value| (value, "a flag"))
                .or_else(|| lookup(name).filter(|v| !v.is_empty()).map(|v| (v, name)))
        };
        let mut config = Self::default();
        if let Some((text, source)) = pick(&flags.wait, WAIT_ENV) {
            // `0s`: open the handoff and leave at once.
            let wait = match text.as_str() {
                "0" | "0s" => Duration::ZERO,
                _ => duration(&text, source)?,
            };
            if wait > MAX_WAIT {
                return Err(HookError::new(format!(
                    "{source}: a wait of {text} is longer than the longest, {}s",
                    MAX_WAIT.as_secs()
                )));
            }
            config.wait = wait;
        }
        if let Some((text, source)) = pick(&flags.expires_in, EXPIRES_IN_ENV) {
            config.expires_in = match text.as_str() {
                "never" | "none" => None,
                _ => Some(duration(&text, source)?),
            };
        }
        if let Some((text, source)) = pick(&flags.on_expiry, ON_EXPIRY_ENV) {
            config.on_expiry = match text.as_str() {
                "none" => None,
                other => Some(Behavior::parse(other).ok_or_else(|| {
                    HookError::new(format!(
                        "{source}: on-expiry {other:?} must be allow, deny or none"
                    ))
                })?),
            };
        }
        if let Some((text, source)) = pick(&flags.parent, PARENT_ENV) {
            let parent = InteractiveHandoffParent::parse(&text)
                .or_else(|_| InteractiveHandoffParent::parse_id(&text))
                .map_err(|e| HookError::new(format!("{source}: {e}")))?;
            config.parent = Some(parent);
        }
        Ok(config)
    }
}

fn duration(text: &str, source: &str) -> Result<Duration, HookError> {
    lf_handoff_api::duration::parse(text)
        .map_err(|e| HookError::new(format!("{source}: {text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_variables_over_defaults() {
        let none = |_: &str| None;
        assert_eq!(
            HookConfig::resolve(&HookFlags::default(), none).unwrap(),
            HookConfig::default()
        );
        let env = |name: &str| match name {
            WAIT_ENV => Some("20s".to_string()),
            EXPIRES_IN_ENV => Some("never".to_string()),
            ON_EXPIRY_ENV => Some("deny".to_string()),
            _ => None,
        };
        let config = HookConfig::resolve(&HookFlags::default(), env).unwrap();
        assert_eq!(config.wait, Duration::from_secs(20));
        assert_eq!(config.expires_in, None);
        assert_eq!(config.on_expiry, Some(Behavior::Deny));
        let flags = HookFlags {
            wait: Some("5s".into()),
            ..HookFlags::default()
        };
        assert_eq!(
            HookConfig::resolve(&flags, env).unwrap().wait,
            Duration::from_secs(5)
        );
    }

    #[test]
    fn bad_values_name_their_source() {
        let env = |name: &str| (name == ON_EXPIRY_ENV).then(|| "maybe".to_string());
        let error = HookConfig::resolve(&HookFlags::default(), env).unwrap_err();
        assert!(error.0.contains(ON_EXPIRY_ENV), "{error}");
        let env = |name: &str| (name == WAIT_ENV).then(|| "1h".to_string());
        assert!(HookConfig::resolve(&HookFlags::default(), env).is_err());
        let env = |name: &str| (name == PARENT_ENV).then(|| "task:nope".to_string());
        assert!(HookConfig::resolve(&HookFlags::default(), env).is_err());
    }
}
