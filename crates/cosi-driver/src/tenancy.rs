//! Who may reach which bucket: a BucketAccess reaches only buckets made for claims of its own
//! namespace; a static bucket, under v1alpha1, only from the namespaces its operator lists on the
//! Bucket ([`ALLOWED_NAMESPACES`]).
//!
//! v0.2.2 binds a static Bucket to a claim of any namespace that names it (`existingBucketName`)
//! and rewrites the Bucket's `spec.bucketClaim` to that claim, so nothing the controller keeps
//! says whose it is: the operator's annotation does (Buckets are cluster-scoped, written by the
//! operator and the controller alone). v1alpha2's controller binds a static Bucket only to the
//! claim its `bucketClaimRef` names, which the driver leaves to it.
//!
//! COSI says so, but v1alpha1 (v0.2.2) lets a claim in namespace B name A's Bucket object
//! (`existingBucketName`) and then hands the driver only the bucket id and `ba-<uid>` of the
//! access. So on every grant the driver looks up the facts ([`Lookup`], with a Kubernetes
//! client in [`crate::tenancy_kube`]) and [`decide`]s on them: a pure function, tested without
//! a cluster.

use std::future::Future;
use std::pin::Pin;

use crate::ids::BucketId;
use crate::status::CallError;

/// Which COSI API the request came through: its objects are read in the same version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// `objectstorage.k8s.io/v1alpha1`.
    V1alpha1,
    /// `objectstorage.k8s.io/v1alpha2`.
    V1alpha2,
}

/// What the cluster says about a grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantFacts {
    /// The namespace of the BucketAccess the grant is for.
    pub access_namespace: String,
    /// One entry per bucket this driver created, in the order asked.
    pub buckets: Vec<BucketFacts>,
}

/// What [`Lookup::shared_with`] answers: for each static bucket, the namespaces it is shared with.
pub type SharedWith<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Vec<String>>, LookupError>> + Send + 'a>>;

/// What [`Lookup::service_account`] answers: the access's namespace and its ServiceAccount.
pub type AccessServiceAccount<'a> =
    Pin<Box<dyn Future<Output = Result<(String, String), LookupError>> + Send + 'a>>;

/// What [`Lookup::still_claimed`] answers: the claim (`namespace/name`) a bucket was made for,
/// while that claim exists and is not being deleted.
pub type StillClaimed<'a> =
    Pin<Box<dyn Future<Output = Result<Option<String>, LookupError>> + Send + 'a>>;

/// Annotation of a static v1alpha1 Bucket: the namespaces whose BucketAccesses may reach its
/// bucket, comma-separated, or `*` for every namespace. Without it, none may.
pub const ALLOWED_NAMESPACES: &str = "cosi.objectbucket.io/allowed-namespaces";

/// What the cluster says about one bucket of a grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketFacts {
    /// The Bucket object's name (for a static bucket: its bucket id).
    pub bucket: String,
    /// The namespace of the claim the Bucket was made for; `None` when it names none.
    pub claim_namespace: Option<String>,
    /// For a static bucket: the namespaces its operator shares it with ([`ALLOWED_NAMESPACES`]).
    pub shared_with: Option<Vec<String>>,
}

/// Why a lookup failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// An object the grant needs does not exist: the grant is not for a real access.
    #[error("{0}")]
    Missing(String),
    /// The Kubernetes API did not answer.
    #[error("Kubernetes API: {0}")]
    Api(String),
}

/// Answers [`GrantFacts`] for a grant. Only buckets this driver created are looked up: a static
/// bucket is the operator's to hand out.
pub trait Lookup: Send + Sync + 'static {
    /// The facts of the grant of the access `account_name` (`ba-<uid>`) to `buckets`.
    fn facts<'a>(
        &'a self,
        version: Version,
        account_name: &'a str,
        buckets: &'a [String],
    ) -> Pin<Box<dyn Future<Output = Result<GrantFacts, LookupError>> + Send + 'a>>;

    /// The namespace and `spec.serviceAccountName` of the BucketAccess `account_name`
    /// (`ba-<uid>`): the ServiceAccount a v1alpha1 access of `authenticationType: IAM` lets in.
    /// The default knows none, which refuses such accesses.
    fn service_account<'a>(&'a self, account_name: &'a str) -> AccessServiceAccount<'a> {
        Box::pin(async move {
            Err(LookupError::Missing(format!(
                "the ServiceAccount of access {account_name:?} cannot be looked up"
            )))
        })
    }

    /// Under v1alpha1, the claim the bucket `bucket` (which this driver created) was made for,
    /// while that claim exists and is not being deleted. v0.2.2 deletes a Bucket when any claim
    /// bound to it goes, and any namespace's claim may bind it (`existingBucketName`), so a
    /// deletion asked while its own claim lives was started by someone else. The default knows
    /// none.
    fn still_claimed<'a>(&'a self, version: Version, bucket: &'a str) -> StillClaimed<'a> {
        let _ = (version, bucket);
        Box::pin(async { Ok(None) })
    }

    /// For each static bucket id of `ids`, the namespaces the operator shares it with, as the
    /// [`ALLOWED_NAMESPACES`] annotations of the Buckets naming it say. The default knows none,
    /// which refuses every static bucket.
    fn shared_with<'a>(&'a self, version: Version, ids: &'a [String]) -> SharedWith<'a> {
        let _ = version;
        Box::pin(async move { Ok(vec![Vec::new(); ids.len()]) })
    }
}

/// The namespaces an [`ALLOWED_NAMESPACES`] annotation lists.
pub fn allowed_namespaces(annotation: &str) -> Vec<String> {
    annotation.split(',').map(str::trim).filter(|ns| !ns.is_empty()).map(str::to_owned).collect()
}

/// Whether the access may reach every bucket. Refusals name the namespaces and Bucket, never
/// anything of the bucket's contents.
pub fn decide(facts: &GrantFacts) -> Result<(), CallError> {
    for bucket in &facts.buckets {
        if let Some(allowed) = &bucket.shared_with {
            if allowed.iter().any(|ns| ns == "*" || *ns == facts.access_namespace) {
                continue;
            }
            return Err(CallError::PermissionDenied(format!(
                "static bucket {:?} is not shared with namespace {:?}: an operator lets a \
                 namespace's accesses reach it by listing the namespace (or *) in the \
                 annotation {ALLOWED_NAMESPACES} of its Bucket",
                bucket.bucket, facts.access_namespace
            )));
        }
        match &bucket.claim_namespace {
            Some(ns) if *ns == facts.access_namespace => {}
            Some(ns) => {
                return Err(CallError::PermissionDenied(format!(
                    "Bucket {:?} was made for a BucketClaim in namespace {ns:?}; a BucketAccess \
                     in namespace {:?} may not reach it. An operator shares a bucket across \
                     namespaces with a static Bucket (existingBucketID)",
                    bucket.bucket, facts.access_namespace
                )));
            }
            None => {
                return Err(CallError::PermissionDenied(format!(
                    "Bucket {:?} names no BucketClaim, so no access may reach it through a \
                     claim; an operator shares a bucket with a static Bucket (existingBucketID)",
                    bucket.bucket
                )));
            }
        }
    }
    Ok(())
}

/// Looks the grant up (when the driver has a [`Lookup`]) and decides on it; static buckets are
/// looked up under v1alpha1 only (see the [module documentation](self)).
pub async fn check(
    lookup: Option<&dyn Lookup>,
    version: Version,
    account_name: &str,
    ids: &[BucketId],
) -> Result<(), CallError> {
    let Some(lookup) = lookup else { return Ok(()) };
    let created: Vec<String> =
        ids.iter().filter(|id| !id.is_static()).map(|id| id.bucket().to_owned()).collect();
    let statics: Vec<String> = match version {
        Version::V1alpha1 => {
            ids.iter().filter(|id| id.is_static()).map(|id| id.bucket().to_owned()).collect()
        }
        Version::V1alpha2 => Vec::new(),
    };
    if created.is_empty() && statics.is_empty() {
        return Ok(());
    }
    let refused = |e: LookupError| match e {
        LookupError::Missing(what) => CallError::PermissionDenied(format!(
            "{what}: access {account_name:?} cannot be checked against the Bucket's claim"
        )),
        LookupError::Api(why) => CallError::Unavailable(format!("Kubernetes API: {why}")),
    };
    let mut facts = lookup.facts(version, account_name, &created).await.map_err(refused)?;
    if !statics.is_empty() {
        let shared = lookup.shared_with(version, &statics).await.map_err(refused)?;
        for (bucket, allowed) in statics.into_iter().zip(shared) {
            let shared_with = Some(allowed);
            facts.buckets.push(BucketFacts { bucket, claim_namespace: None, shared_with });
        }
    }
    decide(&facts)
}

/// Refuses the deletion of a bucket this driver created while the claim it was made for lives
/// (see [`Lookup::still_claimed`]): the sidecar asks again, and the deletion goes ahead once
/// that claim is deleted too.
pub async fn check_deletion(
    lookup: Option<&dyn Lookup>,
    version: Version,
    bucket: &str,
) -> Result<(), CallError> {
    let Some(lookup) = lookup else { return Ok(()) };
    match lookup.still_claimed(version, bucket).await {
        Ok(None) => Ok(()),
        Ok(Some(claim)) => Err(CallError::PermissionDenied(format!(
            "bucket {bucket:?} was made for claim {claim}, which still exists: its Bucket's \
             deletion was started by another claim that bound it, and is refused until {claim} \
             is deleted"
        ))),
        Err(LookupError::Missing(_)) => Ok(()),
        Err(LookupError::Api(why)) => Err(CallError::Unavailable(format!("Kubernetes API: {why}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(access: &str, claims: &[Option<&str>]) -> GrantFacts {
        GrantFacts {
            access_namespace: access.to_owned(),
            buckets: claims
                .iter()
                .enumerate()
                .map(|(i, ns)| BucketFacts {
                    bucket: format!("b{i}"),
                    claim_namespace: ns.map(str::to_owned),
                    shared_with: None,
                })
                .collect(),
        }
    }

    #[test]
    fn an_access_reaches_buckets_of_its_own_namespace_only() {
        assert!(decide(&facts("a", &[Some("a"), Some("a")])).is_ok());
        // The v0.2.2 attack: a claim in b bound a's Bucket through existingBucketName.
        let err = decide(&facts("b", &[Some("a")])).unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.to_string().contains("\"a\"") && err.to_string().contains("\"b\""), "{err}");
        assert!(decide(&facts("a", &[Some("a"), Some("b")])).is_err());
        assert!(decide(&facts("a", &[None])).is_err());
    }

    struct Fixed(Result<GrantFacts, LookupError>);

    impl Lookup for Fixed {
        fn facts<'a>(
            &'a self,
            _: Version,
            _: &'a str,
            buckets: &'a [String],
        ) -> Pin<Box<dyn Future<Output = Result<GrantFacts, LookupError>> + Send + 'a>> {
            let _ = buckets;
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    #[tokio::test]
    async fn static_buckets_pass_and_lookup_failures_say_why() {
        let id = |b: &str| BucketId::Existing { bucket: b.to_owned() };
        let created = [BucketId::Created { bucket: "b0".into(), owner: "cosi-b-x".into() }];
        let never = Fixed(Err(LookupError::Api("unused".into())));
        // Under v1alpha2 the controller keeps a static Bucket to the claim it names.
        assert!(check(Some(&never), Version::V1alpha2, "ba-1", &[id("s")]).await.is_ok());
        assert!(check(None, Version::V1alpha1, "ba-1", &created).await.is_ok());
        let down = check(Some(&never), Version::V1alpha1, "ba-1", &created).await;
        assert_eq!(down.unwrap_err().code(), tonic::Code::Unavailable);
        let missing = Fixed(Err(LookupError::Missing("no BucketAccess".into())));
        let err = check(Some(&missing), Version::V1alpha2, "ba-1", &created).await;
        assert_eq!(err.unwrap_err().code(), tonic::Code::PermissionDenied);
        let other = Fixed(Ok(facts("b", &[Some("a")])));
        assert!(check(Some(&other), Version::V1alpha1, "ba-1", &created).await.is_err());
    }

    /// Answers that a fixed claim still wants every bucket (or the lookup's failure).
    struct Claimed(Result<Option<String>, LookupError>);

    impl Lookup for Claimed {
        fn facts<'a>(
            &'a self,
            _: Version,
            _: &'a str,
            _: &'a [String],
        ) -> Pin<Box<dyn Future<Output = Result<GrantFacts, LookupError>> + Send + 'a>> {
            unreachable!("a deletion looks up no grant")
        }

        fn still_claimed<'a>(&'a self, _: Version, _: &'a str) -> StillClaimed<'a> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    #[tokio::test]
    async fn a_bucket_is_not_deleted_while_the_claim_it_was_made_for_lives() {
        let v1 = Version::V1alpha1;
        let alive = Claimed(Ok(Some("victim/data".into())));
        let err = check_deletion(Some(&alive), v1, "bucket-1").await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.to_string().contains("victim/data"), "{err}");
        assert!(check_deletion(Some(&Claimed(Ok(None))), v1, "bucket-1").await.is_ok());
        let gone = Claimed(Err(LookupError::Missing("no claim".into())));
        assert!(check_deletion(Some(&gone), v1, "bucket-1").await.is_ok());
        let down = Claimed(Err(LookupError::Api("down".into())));
        let err = check_deletion(Some(&down), v1, "bucket-1").await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unavailable, "retried, never deleted blind");
        assert!(check_deletion(None, v1, "bucket-1").await.is_ok());
    }

    /// Answers the grant's access namespace, and for static buckets what a fixed table says.
    struct Shared(&'static str, Vec<Vec<String>>);

    impl Lookup for Shared {
        fn facts<'a>(
            &'a self,
            _: Version,
            _: &'a str,
            buckets: &'a [String],
        ) -> Pin<Box<dyn Future<Output = Result<GrantFacts, LookupError>> + Send + 'a>> {
            assert!(buckets.is_empty(), "only static buckets here");
            let facts = GrantFacts { access_namespace: self.0.into(), buckets: Vec::new() };
            Box::pin(async move { Ok(facts) })
        }

        fn shared_with<'a>(&'a self, _: Version, ids: &'a [String]) -> SharedWith<'a> {
            assert_eq!(ids.len(), self.1.len());
            let answer = self.1.clone();
            Box::pin(async move { Ok(answer) })
        }
    }

    #[tokio::test]
    async fn a_v1alpha1_static_bucket_reaches_only_the_namespaces_its_operator_lists() {
        let id = |b: &str| BucketId::Existing { bucket: b.to_owned() };
        let v1 = Version::V1alpha1;
        let listed = Shared("a", vec![allowed_namespaces(" a , b ")]);
        assert!(check(Some(&listed), v1, "ba-1", &[id("s")]).await.is_ok());
        let everyone = Shared("z", vec![allowed_namespaces("*")]);
        assert!(check(Some(&everyone), v1, "ba-1", &[id("s")]).await.is_ok());
        let other = Shared("c", vec![allowed_namespaces("a,b")]);
        let err = check(Some(&other), v1, "ba-1", &[id("s")]).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        assert!(err.to_string().contains(ALLOWED_NAMESPACES), "{err}");
        let unmarked = Shared("a", vec![Vec::new()]);
        assert!(check(Some(&unmarked), v1, "ba-1", &[id("s")]).await.is_err(), "closed by default");
        // A lookup that does not say knows no sharing: refused.
        struct Silent;
        impl Lookup for Silent {
            fn facts<'a>(
                &'a self,
                _: Version,
                _: &'a str,
                _: &'a [String],
            ) -> Pin<Box<dyn Future<Output = Result<GrantFacts, LookupError>> + Send + 'a>>
            {
                let facts = GrantFacts { access_namespace: "a".into(), buckets: Vec::new() };
                Box::pin(async move { Ok(facts) })
            }
        }
        assert!(check(Some(&Silent), v1, "ba-1", &[id("s")]).await.is_err());
        assert_eq!(allowed_namespaces(",,"), Vec::<String>::new());
    }
}
