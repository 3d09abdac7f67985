//! The operator credential: one key pair that administers the whole store over the S3 endpoint.
//!
//! Claim keys reach only their own bucket. The operator key may also create and delete buckets,
//! list every bucket and use every object operation on any of them. It is configuration, not
//! state: it is never written under the root, and it exists only while the binary hands one to
//! [`BucketStore::set_admin`](crate::BucketStore::set_admin).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Name of the entry holding the access key id, in a credentials file or a Secret.
pub const ACCESS_KEY_ID_ENTRY: &str = "AWS_ACCESS_KEY_ID";
/// Name of the entry holding the secret access key, in a credentials file or a Secret.
pub const SECRET_ACCESS_KEY_ENTRY: &str = "AWS_SECRET_ACCESS_KEY";

/// Prefix of every claim key id; an operator key id may not start with it, so the two kinds
/// can never be confused.
pub(crate) const CLAIM_KEY_PREFIX: &str = "HPAK";
/// Shortest secret accepted: the key can read and delete every bucket.
pub const MIN_SECRET_LEN: usize = 8;
const MAX_FIELD_LEN: usize = 128;

/// Why operator credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AdminCredentialsError {
    /// The credentials file cannot be read.
    #[error("cannot read the admin credentials file {path:?}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The file system error.
        source: io::Error,
    },
    /// The credentials are missing, malformed or unusable.
    #[error("{origin}: {message}")]
    Invalid {
        /// Where the credentials came from, e.g. the file and line.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid(origin: &str, message: impl Into<String>) -> AdminCredentialsError {
    AdminCredentialsError::Invalid { origin: origin.to_owned(), message: message.into() }
}

/// The operator's key pair. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminCredentials {
    access_key_id: String,
    secret_access_key: String,
}

impl std::fmt::Debug for AdminCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

impl AdminCredentials {
    /// Checks and wraps a key pair.
    ///
    /// The access key id must be 3 to 128 ASCII letters, digits, `-`, `_` or `.` (it travels
    /// inside the SigV4 `Credential=` field, where `/`, `,` or spaces would break parsing) and
    /// must not start with `HPAK`, the prefix of claim keys. The secret must be 8 to 128
    /// printable ASCII characters without spaces.
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
    ) -> Result<Self, AdminCredentialsError> {
        Self::checked(access_key_id.into(), secret_access_key.into(), "admin credentials")
    }

    fn checked(
        access_key_id: String,
        secret_access_key: String,
        origin: &str,
    ) -> Result<Self, AdminCredentialsError> {
        let id_ok = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
        if !(3..=MAX_FIELD_LEN).contains(&access_key_id.len()) || !access_key_id.bytes().all(id_ok)
        {
            return Err(invalid(
                origin,
                format!(
                    "{ACCESS_KEY_ID_ENTRY} must be 3 to {MAX_FIELD_LEN} ASCII letters, digits, \
                     '-', '_' or '.'"
                ),
            ));
        }
        if access_key_id.starts_with(CLAIM_KEY_PREFIX) {
            return Err(invalid(
                origin,
                format!(
                    "{ACCESS_KEY_ID_ENTRY} must not start with {CLAIM_KEY_PREFIX:?}, which is \
                     reserved for claim keys"
                ),
            ));
        }
        if !(MIN_SECRET_LEN..=MAX_FIELD_LEN).contains(&secret_access_key.len())
            || !secret_access_key.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(invalid(
                origin,
                format!(
                    "{SECRET_ACCESS_KEY_ENTRY} must be {MIN_SECRET_LEN} to {MAX_FIELD_LEN} \
                     printable ASCII characters without spaces"
                ),
            ));
        }
        Ok(Self { access_key_id, secret_access_key })
    }

    /// Reads an env-style file holding `AWS_ACCESS_KEY_ID=...` and `AWS_SECRET_ACCESS_KEY=...`
    /// lines.
    ///
    /// Blank lines and lines starting with `#` are skipped, a leading `export ` is allowed,
    /// values may be wrapped in single or double quotes (taken literally, no escapes), and other
    /// variables are ignored. A key given twice is an error. A file any user may read is
    /// accepted with a warning.
    ///
    /// Blocking; meant for start-up.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, AdminCredentialsError> {
        let path = path.as_ref();
        let read_error =
            |source: io::Error| AdminCredentialsError::Read { path: path.to_owned(), source };
        let text = fs::read_to_string(path).map_err(read_error)?;
        if fs::metadata(path).map_err(read_error)?.permissions().mode() & 0o004 != 0 {
            tracing::warn!(
                path = %path.display(),
                "the admin credentials file is readable by every user; restrict it (chmod 600)"
            );
        }
        let origin = format!("admin credentials file {}", path.display());
        let mut entries = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").map_or(line, str::trim_start);
            let Some((name, value)) = line.split_once('=') else {
                return Err(invalid(
                    &format!("{origin}, line {}", number + 1),
                    "expected NAME=value",
                ));
            };
            entries.push((name.trim().to_owned(), unquote(value.trim()).to_owned()));
        }
        Self::from_entries(&origin, entries)
    }

    /// Builds the credentials from named values, such as the `data` of a Kubernetes Secret:
    /// the entries [`ACCESS_KEY_ID_ENTRY`] and [`SECRET_ACCESS_KEY_ENTRY`] are used, others are
    /// ignored. Values must be UTF-8; surrounding whitespace (a trailing newline from
    /// `kubectl create secret --from-file`) is dropped. `origin` names the source in errors,
    /// e.g. `"Secret ops/s3-admin"`.
    pub fn from_entries<K, V>(
        origin: &str,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, AdminCredentialsError>
    where
        K: AsRef<str>,
        V: AsRef<[u8]>,
    {
        let (mut id, mut secret) = (None, None);
        for (name, value) in entries {
            let slot = match name.as_ref() {
                ACCESS_KEY_ID_ENTRY => &mut id,
                SECRET_ACCESS_KEY_ENTRY => &mut secret,
                _ => continue,
            };
            let name = name.as_ref();
            if slot.is_some() {
                return Err(invalid(origin, format!("{name} is given more than once")));
            }
            let value = std::str::from_utf8(value.as_ref())
                .map_err(|_| invalid(origin, format!("{name} is not UTF-8")))?;
            *slot = Some(value.trim().to_owned());
        }
        let missing = |name: &str| invalid(origin, format!("{name} is missing"));
        let id = id.ok_or_else(|| missing(ACCESS_KEY_ID_ENTRY))?;
        let secret = secret.ok_or_else(|| missing(SECRET_ACCESS_KEY_ENTRY))?;
        Self::checked(id, secret, origin)
    }

    /// The access key id clients sign with.
    pub fn access_key_id(&self) -> &str {
        &self.access_key_id
    }

    /// The secret access key.
    pub fn secret_access_key(&self) -> &str {
        &self.secret_access_key
    }
}

/// Strips one pair of matching surrounding quotes.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote).and_then(|v| v.strip_suffix(quote)) {
            return inner;
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("admin.env");
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn error_of(dir: &Path, text: &str) -> String {
        AdminCredentials::from_file(write(dir, text, 0o600)).unwrap_err().to_string()
    }

    #[test]
    fn from_file_reads_env_style_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write(
            tmp.path(),
            "# operator key\n\n  export AWS_ACCESS_KEY_ID = \"OPERATORKEY01\"\r\n\
             AWS_DEFAULT_REGION=us-east-1\n   # indented comment\n\
             AWS_SECRET_ACCESS_KEY='s3cr3t/with+symbols='\n",
            0o600,
        );
        let creds = AdminCredentials::from_file(&path).unwrap();
        assert_eq!(creds.access_key_id(), "OPERATORKEY01");
        assert_eq!(creds.secret_access_key(), "s3cr3t/with+symbols=");
        assert_eq!(creds, AdminCredentials::new("OPERATORKEY01", "s3cr3t/with+symbols=").unwrap());

        // World-readable only warns.
        let path =
            write(tmp.path(), "AWS_ACCESS_KEY_ID=abc\nAWS_SECRET_ACCESS_KEY=12345678", 0o644);
        assert_eq!(AdminCredentials::from_file(&path).unwrap().access_key_id(), "abc");
    }

    #[test]
    fn from_file_errors_are_clear() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("absent.env");
        let err = AdminCredentials::from_file(&missing).unwrap_err();
        assert!(matches!(err, AdminCredentialsError::Read { .. }), "{err}");
        assert!(err.to_string().contains("absent.env"), "{err}");

        let err = error_of(tmp.path(), "AWS_ACCESS_KEY_ID=operator\n");
        assert!(err.contains("AWS_SECRET_ACCESS_KEY is missing"), "{err}");
        assert!(err.contains("admin.env"), "{err}");
        let err = error_of(tmp.path(), "# nothing\nAWS_SECRET_ACCESS_KEY=secretsecret\n");
        assert!(err.contains("AWS_ACCESS_KEY_ID is missing"), "{err}");
        let err = error_of(tmp.path(), "AWS_ACCESS_KEY_ID=operator\njust words\n");
        assert!(err.contains("line 2") && err.contains("NAME=value"), "{err}");
        let err = error_of(
            tmp.path(),
            "AWS_ACCESS_KEY_ID=a1b\nAWS_ACCESS_KEY_ID=a2b\nAWS_SECRET_ACCESS_KEY=secretsecret",
        );
        assert!(err.contains("more than once"), "{err}");
        let err = error_of(tmp.path(), "AWS_ACCESS_KEY_ID=operator\nAWS_SECRET_ACCESS_KEY=short");
        assert!(err.contains("AWS_SECRET_ACCESS_KEY must be 8"), "{err}");
        let err = error_of(tmp.path(), "AWS_ACCESS_KEY_ID=\nAWS_SECRET_ACCESS_KEY=secretsecret");
        assert!(err.contains("AWS_ACCESS_KEY_ID must be"), "{err}");
    }

    #[test]
    fn key_pairs_are_validated() {
        AdminCredentials::new("AKIAOPERATOR", "0123456789abcdef").unwrap();
        for id in ["ab", "has space", "a/b", "a,b", "ключ", &"a".repeat(129)] {
            assert!(AdminCredentials::new(id, "secretsecret").is_err(), "{id:?}");
        }
        let err = AdminCredentials::new("HPAK0000000000000000", "secretsecret").unwrap_err();
        assert!(err.to_string().contains("reserved for claim keys"), "{err}");
        for secret in ["1234567", "has a space", "tab\tinside"] {
            assert!(AdminCredentials::new("operator", secret).is_err(), "{secret:?}");
        }
    }

    #[test]
    fn from_entries_takes_secret_data() {
        let data = [
            ("AWS_ACCESS_KEY_ID", b"operator\n".to_vec()),
            ("AWS_SECRET_ACCESS_KEY", b"secretsecret".to_vec()),
            ("unrelated", vec![0xff]),
        ];
        let creds = AdminCredentials::from_entries("Secret ops/s3-admin", data).unwrap();
        assert_eq!(creds.access_key_id(), "operator");
        let err = AdminCredentials::from_entries(
            "Secret ops/s3-admin",
            [("AWS_ACCESS_KEY_ID", b"operator".as_slice())],
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "Secret ops/s3-admin: AWS_SECRET_ACCESS_KEY is missing");
        let err = AdminCredentials::from_entries(
            "Secret ops/s3-admin",
            [("AWS_ACCESS_KEY_ID", b"op\xffr".as_slice()), ("AWS_SECRET_ACCESS_KEY", b"x")],
        )
        .unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
    }

    #[test]
    fn debug_redacts_the_secret() {
        let creds = AdminCredentials::new("operator", "do-not-print-me").unwrap();
        let shown = format!("{creds:?}");
        assert!(shown.contains("operator") && !shown.contains("do-not-print-me"), "{shown}");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn file(text: &str) -> Result<AdminCredentials, String> {
            let tmp = tempfile::tempdir().unwrap();
            AdminCredentials::from_file(write(tmp.path(), text, 0o600)).map_err(|e| e.to_string())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]

            /// A key pair reads the same from a file (plain or quoted) as from a Secret.
            #[test]
            fn a_file_and_a_secret_with_one_key_read_alike(
                id in prop_oneof!["[A-Za-z0-9._-]{0,20}", any::<String>()],
                secret in prop_oneof!["[!-~]{0,20}", any::<String>()],
            ) {
                // A line break cannot be written inside a value of a file of lines.
                prop_assume!(!id.contains(['\n', '\r']) && !secret.contains(['\n', '\r']));
                let entries = [
                    (ACCESS_KEY_ID_ENTRY, id.as_str()),
                    (SECRET_ACCESS_KEY_ENTRY, secret.as_str()),
                ];
                let from_secret = AdminCredentials::from_entries("Secret", entries).ok();
                if let Some(read) = &from_secret {
                    let quoted = format!(
                        "{ACCESS_KEY_ID_ENTRY}=\"{id}\"\n{SECRET_ACCESS_KEY_ENTRY}=\"{secret}\"\n"
                    );
                    let from_file = file(&quoted);
                    prop_assert_eq!(from_file.as_ref(), Ok(read));
                    if unquote(read.secret_access_key()) == read.secret_access_key() {
                        let plain = format!(
                            "{ACCESS_KEY_ID_ENTRY}={id}\n{SECRET_ACCESS_KEY_ENTRY}={secret}\n"
                        );
                        let from_file = file(&plain);
                        prop_assert_eq!(from_file.as_ref(), Ok(read));
                    }
                }
            }

            #[test]
            fn any_file_is_judged(
                text in prop_oneof![
                    any::<String>(),
                    concat!(
                        "((export )?(AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|#|X) ?= ?",
                        "[\"']?[!-~]{0,12}[\"']?\r?\n){0,4}"
                    ),
                ],
            ) {
                let _ = file(&text);
            }
        }
    }
}
