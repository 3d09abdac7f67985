//! The claims sharing across namespaces, kept as claims and ObjectBuckets are watched, so that a
//! grant's, class's or namespace's change finds the claims it concerns among these few rather
//! than by decoding every cached claim and every ObjectBucket.

use bucket_api::ObjectBucket;
use bucket_api::contract::annotations;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use std::collections::BTreeSet;

use crate::bucket::consent::share_from;
use crate::bucket::grant_rules::split_share_from;
use crate::kubernetes::cache::claims::CachedClaim;
use crate::kubernetes::cache::compact::Compact;

/// A claim by namespace and name.
type ClaimKey = (String, String);

/// Who shares from whom: a reader claim and the claim of another namespace it names.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Crossing {
    reader: ClaimKey,
    owner: ClaimKey,
}

/// The crossings claims ask for (their `shareFrom`) and those ObjectBuckets record (a claim's
/// own `shareFrom` may have changed since it was bound, and the record is what is revoked).
pub(crate) struct SharingIndex {
    asked: Compact<CachedClaim, Crossing>,
    recorded: Compact<ObjectBucket, Crossing>,
}

impl Default for SharingIndex {
    fn default() -> Self {
        Self { asked: Compact::new(Box::new(asked)), recorded: Compact::new(Box::new(recorded)) }
    }
}

impl SharingIndex {
    /// Takes in one event of the claims' watch (after the claims' cache).
    pub(crate) fn claim_event(&self, event: &watcher::Event<CachedClaim>) {
        self.asked.apply(event);
    }

    /// Takes in one event of the ObjectBuckets' watch.
    pub(crate) fn bucket_event(&self, event: &watcher::Event<ObjectBucket>) {
        self.recorded.apply(event);
    }

    /// The claims sharing from a claim of `namespace` (of any namespace when `None`).
    pub(crate) fn sharing_from(&self, namespace: Option<&str>) -> Vec<ObjectRef<CachedClaim>> {
        self.select(|crossing| namespace.is_none_or(|wanted| crossing.owner.0 == wanted))
    }

    /// The claims of `namespace` sharing from another namespace.
    pub(crate) fn sharing_in(&self, namespace: &str) -> Vec<ObjectRef<CachedClaim>> {
        self.select(|crossing| crossing.reader.0 == namespace)
    }

    fn select(&self, wanted: impl Fn(&Crossing) -> bool) -> Vec<ObjectRef<CachedClaim>> {
        let asked =
            self.asked.keys().into_iter().filter_map(|(ns, name)| self.asked.get(&ns, &name));
        let recorded =
            self.recorded.keys().into_iter().filter_map(|(ns, name)| self.recorded.get(&ns, &name));
        let readers: BTreeSet<ClaimKey> =
            asked.chain(recorded).filter(|c| wanted(c)).map(|c| c.reader).collect();
        readers.into_iter().map(|(ns, name)| ObjectRef::new(&name).within(&ns)).collect()
    }
}

/// The crossing a claim asks for, if its `shareFrom` names a claim of another namespace.
fn asked(cached: &CachedClaim) -> Option<Crossing> {
    let claim = cached.claim().ok()?;
    let reader = (claim.namespace()?, claim.name_any());
    crossing(reader, share_from(&claim)?)
}

/// The crossing an ObjectBucket records for the claim it is bound to.
fn recorded(bucket: &ObjectBucket) -> Option<Crossing> {
    let claim_ref = bucket.spec.claim_ref.as_ref()?;
    let reader = (claim_ref.namespace.clone()?, claim_ref.name.clone()?);
    crossing(reader, bucket.annotations().get(annotations::SHARED_FROM_CLAIM)?)
}

fn crossing(reader: ClaimKey, share_from: &str) -> Option<Crossing> {
    let (namespace, claim) = split_share_from(share_from)?;
    (namespace != reader.0)
        .then(|| Crossing { reader, owner: (namespace.to_owned(), claim.to_owned()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bucket_api::ObjectBucketClaim;
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn claim(ns: &str, name: &str, share_from: Option<&str>) -> CachedClaim {
        let mut claim = ObjectBucketClaim::new(name, Default::default());
        claim.metadata.namespace = Some(ns.into());
        claim.metadata.uid = Some(format!("uid-{ns}-{name}"));
        claim.spec.additional_config = share_from.map(|text| {
            BTreeMap::from([(bucket_api::contract::CLAIM_SHARE_FROM.into(), text.into())])
        });
        CachedClaim::pack(claim)
    }

    fn bucket(name: &str, reader: (&str, &str), recorded: &str) -> ObjectBucket {
        let mut bucket = ObjectBucket::new(name, Default::default());
        bucket.metadata = ObjectMeta {
            name: Some(name.into()),
            annotations: Some(BTreeMap::from([(
                annotations::SHARED_FROM_CLAIM.to_owned(),
                recorded.to_owned(),
            )])),
            ..Default::default()
        };
        bucket.spec.claim_ref = Some(ObjectReference {
            namespace: Some(reader.0.into()),
            name: Some(reader.1.into()),
            ..Default::default()
        });
        bucket
    }

    fn names(refs: Vec<ObjectRef<CachedClaim>>) -> Vec<String> {
        refs.iter()
            .map(|r| format!("{}/{}", r.namespace.as_deref().unwrap_or(""), r.name))
            .collect()
    }

    #[test]
    fn only_claims_crossing_namespaces_are_kept_and_found_by_either_side() {
        let index = SharingIndex::default();
        index.claim_event(&watcher::Event::Init);
        for (i, (ns, from)) in [
            ("a", None),
            ("b", Some("a/owner")),
            ("a", Some("a/owner")),
            ("c", Some("owner")),
            ("d", Some("e/owner")),
        ]
        .into_iter()
        .enumerate()
        {
            index.claim_event(&watcher::Event::InitApply(claim(ns, &format!("c{i}"), from)));
        }
        index.claim_event(&watcher::Event::InitDone);
        index.bucket_event(&watcher::Event::Apply(bucket("ob-x", ("f", "x"), "a/owner")));

        assert_eq!(names(index.sharing_from(Some("a"))), ["b/c1", "f/x"]);
        assert_eq!(names(index.sharing_from(Some("e"))), ["d/c4"]);
        assert_eq!(names(index.sharing_from(None)), ["b/c1", "d/c4", "f/x"]);
        assert_eq!(names(index.sharing_in("d")), ["d/c4"]);
        assert!(index.sharing_in("a").is_empty(), "sharing inside a namespace is not indexed");
        assert_eq!(index.asked.keys().len(), 2, "claims that do not cross are not kept");
    }

    #[test]
    fn a_changed_or_deleted_claim_or_bucket_leaves_the_index() {
        let index = SharingIndex::default();
        index.claim_event(&watcher::Event::Apply(claim("b", "r", Some("a/owner"))));
        index.bucket_event(&watcher::Event::Apply(bucket("ob-r", ("b", "r"), "a/owner")));
        index.claim_event(&watcher::Event::Apply(claim("b", "r", Some("z/other"))));
        assert_eq!(names(index.sharing_from(Some("a"))), ["b/r"], "the record still concerns a");
        assert_eq!(names(index.sharing_from(Some("z"))), ["b/r"]);
        index.bucket_event(&watcher::Event::Delete(bucket("ob-r", ("b", "r"), "a/owner")));
        assert!(index.sharing_from(Some("a")).is_empty());
        index.claim_event(&watcher::Event::Delete(claim("b", "r", Some("z/other"))));
        assert!(index.sharing_from(None).is_empty());
    }

    #[test]
    fn a_relist_replaces_what_was_kept() {
        let index = SharingIndex::default();
        index.claim_event(&watcher::Event::Apply(claim("b", "gone", Some("a/owner"))));
        index.claim_event(&watcher::Event::Init);
        index.claim_event(&watcher::Event::InitApply(claim("b", "kept", Some("a/owner"))));
        index.claim_event(&watcher::Event::InitDone);
        assert_eq!(names(index.sharing_from(Some("a"))), ["b/kept"]);
    }
}
