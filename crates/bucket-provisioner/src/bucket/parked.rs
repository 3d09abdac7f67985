//! Claims parked on a permanent failure: what the failure depended on ([`Inputs`]), and
//! whether any of it changed since. Kept apart from [`crate::bucket::context`], since the inputs
//! are read through the observe, consent and sharing phases, which all stand on the context.

use bucket_api::ObjectBucketClaim;
use kube::{Resource, ResourceExt};

use crate::bucket::bound::observe::bound_class;
use crate::bucket::consent::bound_consent;
use crate::bucket::context::{Context, Inputs};
use crate::bucket::observe::observe;
use crate::bucket::rotation_record::requested;
use crate::bucket::sharing::bound_owner_mode;

impl<P> Context<P> {
    pub(crate) fn inputs(&self, claim: &ObjectBucketClaim) -> Inputs {
        let bound = observe(claim, self).bound;
        let class_name = match &bound {
            Some(bound) => bound_class(claim, bound),
            None => claim.spec.storage_class_name.as_str(),
        };
        let class = self.caches.class(class_name);
        let sharing = bound.as_ref().map(|bound| {
            let withdrawn = matches!(bound_consent(claim, bound, self), Some(Err(_)));
            (bound_owner_mode(claim, bound, self), withdrawn)
        });
        Inputs {
            generation: claim.metadata.generation,
            rotation_request: requested(claim).map(str::to_owned),
            class_version: class.and_then(|c| c.resource_version()),
            sharing,
        }
    }

    /// Remembers that the claim failed permanently with `inputs`, read before the reconcile
    /// looked: a change landing while it ran (a class replaced) then differs from what is parked
    /// and wakes it. Our own status writes wake the claim up again; parking keeps that from
    /// calling the backend until something changed. (After a restart a parked claim is tried
    /// once more, which is harmless.)
    pub(crate) fn park(&self, key: &str, inputs: Inputs) {
        self.parked.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), inputs);
    }

    /// Whether the claim failed permanently and none of its `inputs` (as they are now) changed
    /// since; a claim being deleted is never parked.
    pub(crate) fn is_parked(&self, key: &str, claim: &ObjectBucketClaim, inputs: &Inputs) -> bool {
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        let Some(recorded) = parked.get(key) else { return false };
        if claim.meta().deletion_timestamp.is_none() && recorded == inputs {
            return true;
        }
        parked.remove(key);
        false
    }
}
