//! What went wrong with a call, and the gRPC status code the spec gives it.

use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::standalone::STANDALONE_NOT_SUPPORTED;
use tonic::{Code, Status};

/// A failed call. Its text never holds a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A request field or parameter is malformed or not accepted (`INVALID_ARGUMENT`).
    #[error("{0}")]
    InvalidArgument(String),
    /// The bucket or access exists with other parameters (`ALREADY_EXISTS`).
    #[error("{0}")]
    AlreadyExists(String),
    /// The bucket does not exist, or not for this driver (`NOT_FOUND`).
    #[error("{0}")]
    NotFound(String),
    /// Access to several buckets with one key cannot be served (`OUT_OF_RANGE`).
    #[error("{0}")]
    OutOfRange(String),
    /// The access may not reach the bucket (`PERMISSION_DENIED`).
    #[error("{0}")]
    PermissionDenied(String),
    /// Something this call needs does not answer now; retrying may succeed (`UNAVAILABLE`).
    #[error("{0}")]
    Unavailable(String),
    /// The backend cannot do this at all (`UNIMPLEMENTED`).
    #[error("{0}")]
    Unimplemented(String),
}

impl CallError {
    /// The status code the spec gives this error.
    pub fn code(&self) -> Code {
        match self {
            Self::InvalidArgument(_) => Code::InvalidArgument,
            Self::AlreadyExists(_) => Code::AlreadyExists,
            Self::NotFound(_) => Code::NotFound,
            Self::OutOfRange(_) => Code::OutOfRange,
            Self::PermissionDenied(_) => Code::PermissionDenied,
            Self::Unavailable(_) => Code::Unavailable,
            Self::Unimplemented(_) => Code::Unimplemented,
        }
    }
}

impl From<BackendError> for CallError {
    fn from(e: BackendError) -> Self {
        let text = e.to_string();
        match &e {
            BackendError::Transient { .. } => Self::Unavailable(text),
            _ if e.is_name_taken() || e.is_access_conflict() => Self::AlreadyExists(text),
            _ if e.is_multi_bucket_unsupported() => Self::OutOfRange(text),
            _ if e.is_not_found() => Self::NotFound(text),
            BackendError::Permanent { reason, .. } if reason == STANDALONE_NOT_SUPPORTED => {
                Self::Unimplemented(text)
            }
            BackendError::Permanent { reason, .. } => {
                Self::InvalidArgument(format!("{reason}: {text}"))
            }
        }
    }
}

/// Logs a refused call (its code and message, which never hold a secret) and answers its
/// status: the sidecar shows the message on the object, and the driver's log says it too.
pub fn refused(call: &'static str, subject: &str, e: CallError) -> Status {
    tracing::warn!(call, subject, code = ?e.code(), "{e}");
    e.into()
}

impl From<CallError> for Status {
    fn from(e: CallError) -> Self {
        Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_errors_get_the_spec_codes() {
        let code = |e: BackendError| CallError::from(e).code();
        assert_eq!(code(BackendError::name_taken("b")), Code::AlreadyExists);
        assert_eq!(code(BackendError::access_conflict("a")), Code::AlreadyExists);
        assert_eq!(code(BackendError::multi_bucket_unsupported()), Code::OutOfRange);
        assert_eq!(code(BackendError::not_found("bucket")), Code::NotFound);
        assert_eq!(code(BackendError::transient("down")), Code::Unavailable);
        assert_eq!(code(BackendError::invalid_parameter("colour")), Code::InvalidArgument);
        let refused = BackendError::permanent(STANDALONE_NOT_SUPPORTED, "no");
        assert_eq!(code(refused), Code::Unimplemented);
    }
}
