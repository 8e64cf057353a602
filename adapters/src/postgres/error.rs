//! Every PostgreSQL error of this backend is mapped here, in one place: a
//! server's error by its SQLSTATE, one row of [`SQLSTATES`] each, and the
//! driver's own errors (no connection, refused, TLS, not a PostgreSQL
//! server) by their type. Each gives the kind a program branches on and a
//! message that names the server and says what to do; none holds the
//! password.

use lf_handoff_application::{StoreError, UnavailableKind};

use super::hosts::{NoUsableHost, Passed};
use super::{Server, TargetSessionAttrs, MIGRATION_LOCK_TIMEOUT};
use crate::sql::engine::ErrorRow;
use crate::sql::schema::UniqueIndex;
use crate::sql::{Dialect as _, EngineError};

/// The SQLSTATEs a row of [`SQLSTATES`] covers.
enum Codes {
    /// These codes.
    Exactly(&'static [&'static str]),
    /// Every code of this class (the first two characters).
    Class(&'static str),
}

/// The server's errors this backend tells apart; any other is
/// `UnavailableKind::Other`.
const SQLSTATES: &[ErrorRow<Codes, Server>] = &[
    // A password or `pg_hba.conf` refused the user.
    ErrorRow {
        codes: Codes::Exactly(&["28P01", "28000"]),
        kind: UnavailableKind::Refused,
        says: |server, detail| {
            format!(
                "PostgreSQL at {} refused user {} ({detail}); check the user and password in \
                 the store URL and the server's pg_hba.conf",
                server.address, server.user
            )
        },
    },
    ErrorRow {
        codes: Codes::Exactly(&["3D000"]),
        kind: UnavailableKind::Refused,
        says: |server, _| {
            format!(
                "database {} does not exist on PostgreSQL at {}; create it (createdb {}) or name \
                 another database in the store URL",
                server.database, server.address, server.database
            )
        },
    },
    ErrorRow {
        codes: Codes::Exactly(&["53300"]),
        kind: UnavailableKind::Unreachable,
        says: |server, detail| {
            format!(
                "PostgreSQL at {} has no free connections ({detail}); lower pool_size in the \
                 store URL or raise the server's max_connections",
                server.address
            )
        },
    },
    // Terminated by an administrator (57P01), a crash of another session
    // (57P02), starting up or shutting down (57P03), an idle session closed
    // by the server (57P05): a later attempt on a new connection may pass.
    ErrorRow {
        codes: Codes::Exactly(&["57P01", "57P02", "57P03", "57P05"]),
        kind: UnavailableKind::Unreachable,
        says: |server, detail| {
            format!(
                "PostgreSQL at {} ended the session or is restarting ({detail}); retry once it \
                 is up",
                server.address
            )
        },
    },
    ErrorRow {
        codes: Codes::Exactly(&["42501"]),
        kind: UnavailableKind::PermissionDenied,
        says: |server, detail| {
            format!(
                "{server}: permission denied ({detail}); grant user {} CREATE on the database \
                 (or have an administrator create schema {} for it) and USAGE on the schema",
                server.user, server.schema
            )
        },
    },
    // A table, or the whole schema, dropped while the store was in use.
    ErrorRow {
        codes: Codes::Exactly(&["42P01", "3F000"]),
        kind: UnavailableKind::Damaged,
        says: |server, detail| {
            format!(
                "{server}: the store's tables are missing ({detail}); the schema was dropped \
                 while in use. Open the store again to recreate it"
            )
        },
    },
    ErrorRow {
        codes: Codes::Exactly(&["55P03"]),
        kind: UnavailableKind::Locked,
        says: |server, detail| {
            format!(
                "{server}: another process held the store's migration lock for over \
                 {MIGRATION_LOCK_TIMEOUT} ({detail}); retry, and check for a stuck process"
            )
        },
    },
    // A read-only transaction: a standby, reached with
    // `target_session_attrs=any` (with `read-write`, `engine_error` reads
    // it as a demoted server first).
    ErrorRow {
        codes: Codes::Exactly(&["25006"]),
        kind: UnavailableKind::PermissionDenied,
        says: |server, detail| {
            format!(
                "{server} is read-only ({detail}); point the store URL at the primary server, \
                 or drop target_session_attrs=any from it"
            )
        },
    },
    // A prepared statement of another client's in this server session
    // (42P05), or ours gone from it (26000): the session is shared by a
    // pooler in transaction mode.
    ErrorRow {
        codes: Codes::Exactly(&["42P05", "26000"]),
        kind: UnavailableKind::Refused,
        says: |server, detail| {
            format!(
                "{server}: the server session changed under the store ({detail}): the store URL \
                 leads to a connection pooler in transaction mode, which hands each \
                 transaction another session; add pooler=transaction to the store URL, so \
                 that the store prepares no statement"
            )
        },
    },
    ErrorRow {
        codes: Codes::Exactly(&["53100"]),
        kind: UnavailableKind::DiskFull,
        says: |server, detail| format!("{server}: the server's disk is full ({detail})"),
    },
    // Connection exceptions.
    ErrorRow {
        codes: Codes::Class("08"),
        kind: UnavailableKind::Unreachable,
        says: |server, detail| {
            format!(
                "lost the connection to PostgreSQL at {}: {detail}",
                server.address
            )
        },
    },
];

impl Codes {
    fn cover(&self, code: &str) -> bool {
        match self {
            Self::Exactly(codes) => codes.contains(&code),
            Self::Class(class) => code.starts_with(class),
        }
    }
}

/// Why a TLS handshake failed, as far as a person can act on it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TlsFailure {
    /// The certificate is valid but names another host.
    HostName,
    /// No trusted authority signed the certificate.
    UnknownIssuer,
    /// Anything else the TLS library refused.
    Other,
}

impl Server {
    /// Maps one sqlx error to what the shared repository understands: a
    /// unique violation, or an actionable `Unavailable`.
    pub(super) fn engine_error(&self, error: sqlx::Error) -> EngineError {
        let (kind, message) = match &error {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                // PostgreSQL names the violated index as the constraint.
                return EngineError::Unique {
                    index: db.constraint().and_then(UniqueIndex::named),
                    detail: db.message().to_string(),
                };
            }
            other => self.describe(other),
        };
        EngineError::Failed(StoreError::unavailable_because(kind, message, error))
    }

    /// The kind and message of an error other than a unique violation.
    pub(super) fn describe(&self, error: &sqlx::Error) -> (UnavailableKind, String) {
        let sqlx::Error::Database(db) = error else {
            return self.driver_error(error);
        };
        let detail = db.message();
        let code = db.code().unwrap_or_default();
        if let Some(parameter) = detail.strip_prefix("unsupported startup parameter: ") {
            return (
                UnavailableKind::Refused,
                format!(
                    "{} refused the startup parameter {parameter} ({detail}): a connection \
                     pooler (PgBouncer) answers there and does not pass it on; admit it in the \
                     pooler's configuration (PgBouncer: add {parameter} to \
                     ignore_startup_parameters in pgbouncer.ini), or remove it from the store \
                     URL",
                    self.address
                ),
            );
        }
        // A pooler (PgBouncer) passes the server's refusal of a login on
        // under its own code, 08P01: the message tells which.
        let code = match &*code {
            "08P01"
                if detail.starts_with("database \"") && detail.ends_with("\" does not exist") =>
            {
                "3D000"
            }
            "08P01"
                if detail.starts_with("password authentication failed")
                    || detail.starts_with("no pg_hba.conf entry") =>
            {
                "28P01"
            }
            // With read-write, a write refused as read-only means the
            // server was demoted under the store: retried elsewhere.
            "25006" if self.attrs == TargetSessionAttrs::ReadWrite => {
                return (
                    UnavailableKind::Unreachable,
                    format!(
                        "{self} turned read-only ({detail}): it was demoted, or a failover is \
                         under way; the store connects again to whichever host of its URL \
                         accepts writes"
                    ),
                );
            }
            code => code,
        };
        match SQLSTATES.iter().find(|row| row.codes.cover(code)) {
            Some(row) => (row.kind, (row.says)(self, detail)),
            None => (
                UnavailableKind::Other,
                format!("{self}: PostgreSQL error {code}: {detail}"),
            ),
        }
    }

    /// This server as one of the URL's hosts, `address`, names it.
    fn at(&self, address: &str) -> Self {
        Self {
            address: address.to_string(),
            ..self.clone()
        }
    }

    /// The kind and message of [`NoUsableHost`]: each host and why it was
    /// passed over; `Unreachable` (retried) when a host may become usable,
    /// as a standby being promoted or a server restarting.
    fn no_usable_host(&self, none: &NoUsableHost) -> (UnavailableKind, String) {
        let mut kinds = Vec::new();
        let reasons: Vec<String> = none
            .passed
            .iter()
            .map(|(address, why)| {
                let (kind, reason) = match why {
                    Passed::Failed(error) => self.at(address).describe(error),
                    Passed::NoAnswer(after) => (
                        UnavailableKind::Unreachable,
                        format!("{address} did not answer within {after:?}"),
                    ),
                    Passed::Standby => (
                        UnavailableKind::Unreachable,
                        format!("{address} is a standby (in recovery) and accepts no writes"),
                    ),
                    Passed::ReadOnly => (
                        UnavailableKind::Unreachable,
                        format!(
                            "{address} accepts no writes (transaction_read_only is on, as \
                             default_transaction_read_only makes it)"
                        ),
                    ),
                };
                kinds.push(if why.may_pass_later() {
                    UnavailableKind::Unreachable
                } else {
                    kind
                });
                reason
            })
            .collect();
        let kind = if kinds.contains(&UnavailableKind::Unreachable) {
            UnavailableKind::Unreachable
        } else {
            kinds
                .first()
                .copied()
                .unwrap_or(UnavailableKind::Unreachable)
        };
        let wanted = match self.attrs {
            TargetSessionAttrs::ReadWrite => "accepts writes",
            TargetSessionAttrs::Any => "answers",
        };
        let message = format!(
            "no server of the store URL {wanted} (database {}, schema {}): {}; a store writes, \
             so it uses a primary: check that one of the hosts is the primary, or that a \
             failover is under way (each call retries within the store's retry window), or \
             add target_session_attrs=any to the store URL to read from a standby",
            self.database,
            self.schema,
            reasons.join("; ")
        );
        (kind, message)
    }

    /// The kind and message of an error of the driver (no answer from a
    /// server).
    fn driver_error(&self, error: &sqlx::Error) -> (UnavailableKind, String) {
        let address = &self.address;
        match error {
            sqlx::Error::Configuration(inner) if inner.is::<NoUsableHost>() => {
                match inner.downcast_ref::<NoUsableHost>() {
                    Some(none) => self.no_usable_host(none),
                    None => (UnavailableKind::Other, format!("{self}: {error}")),
                }
            }
            sqlx::Error::PoolTimedOut => (
                UnavailableKind::Unreachable,
                format!(
                    "no connection to PostgreSQL at {address} within {:?}: the server is down, \
                     unreachable or out of connections (max_connections), or all {} pooled \
                     connections stayed busy; check the server, or raise acquire_timeout or \
                     pool_size in the store URL",
                    self.acquire_timeout, self.pool_size
                ),
            ),
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => (
                UnavailableKind::Unreachable,
                format!(
                    "cannot connect to PostgreSQL at {address}: connection refused; check that \
                     the server is running and listening on that host and port"
                ),
            ),
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => (
                UnavailableKind::Unreachable,
                format!(
                    "{address} closed the connection unexpectedly ({io}); check that the store \
                     URL's host and port name a PostgreSQL server and that it is up"
                ),
            ),
            sqlx::Error::Io(io) => match tls_failure(io) {
                Some(failure) => (UnavailableKind::Refused, self.tls_message(&failure, io)),
                None => (
                    UnavailableKind::Unreachable,
                    format!("cannot talk to PostgreSQL at {address}: {io}"),
                ),
            },
            sqlx::Error::Tls(tls) if tls.to_string().contains("does not support TLS") => (
                UnavailableKind::Refused,
                format!(
                    "PostgreSQL at {address} does not offer TLS, but the store URL asks for it \
                     (sslmode=require, verify-ca or verify-full); turn ssl on in the server's \
                     postgresql.conf, or use sslmode=prefer or disable"
                ),
            ),
            sqlx::Error::Tls(tls) => (
                UnavailableKind::Refused,
                format!(
                    "TLS with PostgreSQL at {address} failed ({tls}); check sslmode and the \
                     certificate options (sslrootcert, sslcert, sslkey) in the store URL"
                ),
            ),
            // A notification where a statement's answer belongs: the server
            // session holds another client's LISTEN, which a pooler in
            // transaction mode hands to whoever comes next.
            sqlx::Error::Protocol(detail) if detail.contains("NotificationResponse") => (
                UnavailableKind::Refused,
                format!(
                    "{address}: the server session changed under the store ({detail}): the \
                     store URL leads to a connection pooler in transaction mode, which handed \
                     this client a session where another one listens for changes; add \
                     pooler=transaction to the store URL (and listen_url=postgres://... of the \
                     server itself, or of a pooler in session mode, for prompt waits)"
                ),
            ),
            sqlx::Error::Protocol(detail) => (
                UnavailableKind::Refused,
                format!(
                    "{address} does not answer like a PostgreSQL server ({detail}); check the \
                     host and port in the store URL"
                ),
            ),
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::Decode(_) => (
                UnavailableKind::Damaged,
                format!(
                    "{self}: a stored value is unreadable ({error}); the store may be damaged or \
                     changed by another program"
                ),
            ),
            other => (UnavailableKind::Other, format!("{self}: {other}")),
        }
    }

    /// What a person can do about a failed TLS handshake.
    fn tls_message(&self, failure: &TlsFailure, io: &std::io::Error) -> String {
        let address = &self.address;
        match failure {
            TlsFailure::HostName => format!(
                "PostgreSQL at {address} presented a TLS certificate that does not name that \
                 host ({io}); connect by a name the certificate lists, or use sslmode=require \
                 (encrypted, the certificate not checked). With this build sslmode=verify-ca \
                 checks the name too, as verify-full does"
            ),
            TlsFailure::UnknownIssuer => format!(
                "PostgreSQL at {address} presented a TLS certificate that no trusted authority \
                 signed ({io}); name the certificate of the authority that signed it with \
                 sslrootcert=/path/to/ca.pem in the store URL, or install it in the system's \
                 certificate store"
            ),
            TlsFailure::Other => format!(
                "TLS with PostgreSQL at {address} failed ({io}); check sslmode and the \
                 certificate options in the store URL"
            ),
        }
    }

    /// The error of a server that did not answer within the acquire
    /// timeout.
    pub(super) fn no_answer(&self) -> StoreError {
        StoreError::unavailable(
            UnavailableKind::Unreachable,
            format!(
                "cannot reach PostgreSQL at {}: no answer within {:?}; check that the server is \
                 running and that this machine can reach that host and port (acquire_timeout in \
                 the store URL sets how long to wait)",
                self.address, self.acquire_timeout
            ),
        )
    }

    /// The `StoreError` of an error where no unique violation is expected.
    pub(super) fn unavailable(&self, error: sqlx::Error) -> StoreError {
        match self.map_error(error) {
            EngineError::Failed(error) => error,
            EngineError::Unique { detail, .. } => StoreError::damaged(format!(
                "{self}: unexpected unique constraint violation: {detail}"
            )),
        }
    }
}

/// The TLS failure an I/O error of the driver carries: its TLS handshake
/// gives the TLS library's error back wrapped in an I/O error, so the type
/// is reached through it; `None` for an I/O error that is not about TLS.
pub(super) fn tls_failure(io: &std::io::Error) -> Option<TlsFailure> {
    use rustls::CertificateError;
    let tls = io.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(match tls {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => TlsFailure::HostName,
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            TlsFailure::UnknownIssuer
        }
        _ => TlsFailure::Other,
    })
}
