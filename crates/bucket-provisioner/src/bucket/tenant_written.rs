//! What a tenant wrote, as a type of its own: it may ask, never decide.

/// A value a tenant wrote: a claim (its spec, annotations, labels, finalizers) or its
/// `additionalConfig`. It is a request. Read it with [`TenantWritten::requested`] to interpret
/// what it asks for, and act on that only within what the StorageClass, the ObjectBucket or the
/// backend's own records allow. Nothing read from it may name an address a credential is sent
/// to, a Secret that is read, or a user, key or bucket that is changed or deleted: those come
/// from operator-written parameters and backend records only (the `tenant_input` test holds
/// every backend to this).
///
/// It has no `Deref`, no `Display` and no conversion out, so every read is spelled out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantWritten<T>(T);

impl<T> TenantWritten<T> {
    /// Wraps what a tenant wrote.
    pub fn new(value: T) -> Self {
        Self(value)
    }

    /// What the tenant asked for, to be interpreted and checked, never trusted.
    pub fn requested(&self) -> &T {
        &self.0
    }

    /// Changes what is asked for (it stays the tenant's word).
    pub fn requested_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T> From<T> for TenantWritten<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}
