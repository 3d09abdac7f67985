//! Random hostile tenants for any bucket provisioner's tests: a tenant whose rights end at its
//! own namespace creates, annotates and deletes claims carrying every record a claim can hold
//! (annotations, labels, finalizers, `additionalConfig`, class and bucket names), valued with
//! what would hurt: the provisioner's name, a victim's bucket, claim and UID, and an address of
//! the tenant's (a [`Tripwire`]). Each backend's test runs [`actions`] of fixed seeds with
//! [`act`] and checks that its victim kept everything.
//!
//! `HOSTILE_FUZZ_SEEDS=7,8,9` or `HOSTILE_FUZZ_RUNS=20` explore more ([`seeds`]); a failure's
//! seed replays it.

use std::collections::BTreeMap;
use std::time::Duration;

use bucket_api::contract::{FINALIZER, LABEL_PROVISIONER, annotations};
use bucket_api::{ObjectBucketClaim, ObjectBucketClaimSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;

use crate::{ControlPlane, Tripwire, bucket_class, claim_tenant, eventually, test_namespace};

/// How many actions one run takes.
pub const ACTIONS: usize = 18;
/// How many claim names a run reuses, so that actions land on the same claims.
pub const NAMES: usize = 4;

/// Every annotation a claim may carry that means something to the library, and one it ignores.
pub const ANNOTATIONS: &[&str] = &[
    annotations::PROVISIONER,
    annotations::BUCKET_SOURCE,
    annotations::RECLAIM_POLICY,
    annotations::ABANDON_BUCKET,
    annotations::ABANDONED,
    annotations::GENERATED_BUCKET_NAME,
    annotations::CREDENTIALS_DIGEST,
    annotations::ACCESS_MODE,
    annotations::ROTATE_CREDENTIALS,
    annotations::ROTATION,
    annotations::SHARED_FROM,
    annotations::SHARED_FROM_CLAIM,
    annotations::BUCKET_LOST,
    annotations::ADOPTED_FROM,
    annotations::ENDPOINT_SCHEME,
    "objectbucket.io/cleanup-state",
];

/// `additionalConfig` keys the library or a backend reads.
pub const CONFIG_KEYS: &[&str] = &[
    "shareFrom",
    "accessMode",
    "maxObjects",
    "maxSize",
    "bucketPolicy",
    "lifecycle",
    "cors",
    "versioning",
    "objectLock",
    "endpoint",
];

/// A value a hostile tenant writes, resolved against what it knows of its victim.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    /// The provisioner's name.
    Provisioner,
    /// `new`.
    New,
    /// `existing`.
    Existing,
    /// `Delete`.
    Delete,
    /// `Retain`.
    Retain,
    /// `true`.
    True,
    /// The victim's bucket.
    VictimBucket,
    /// The victim claim's name.
    VictimClaim,
    /// The victim claim's UID.
    VictimUid,
    /// The victim's ObjectBucket.
    VictimObjectBucket,
    /// The tenant's address.
    TripwireUrl,
    /// A backend state naming the tripwire everywhere and the victim's bucket and user.
    ForgedState,
    /// `ReadWrite`.
    ReadWrite,
    /// Not JSON, with a NUL.
    Garbage,
}

/// Which StorageClass a claim names.
#[derive(Clone, Copy, Debug)]
pub enum Class {
    /// The operator's class for this provisioner.
    Ours,
    /// One that does not exist.
    Missing,
    /// One of another provisioner.
    Theirs,
}

/// Which bucket a claim names.
#[derive(Clone, Copy, Debug)]
pub enum Bucket {
    /// The victim's.
    Victims,
    /// One of the tenant's own naming.
    Own,
    /// A generated one.
    Generated,
}

/// One thing a hostile tenant does.
#[derive(Clone, Debug)]
pub enum Action {
    /// Creates claim number `name` of `class` and `bucket`, carrying `annotations` and
    /// `config` (indexes into [`ANNOTATIONS`] and [`CONFIG_KEYS`]), the library's finalizer
    /// and provisioner label if asked.
    #[allow(missing_docs)]
    Create {
        name: usize,
        class: Class,
        bucket: Bucket,
        annotations: Vec<(usize, Value)>,
        config: Vec<(usize, Value)>,
        finalizer: bool,
        label: bool,
    },
    /// Merges `annotations` into claim number `name`.
    #[allow(missing_docs)]
    Annotate { name: usize, annotations: Vec<(usize, Value)> },
    /// Merges `config` into claim number `name`'s `additionalConfig`.
    #[allow(missing_docs)]
    Configure { name: usize, config: Vec<(usize, Value)> },
    /// Deletes claim number `name`.
    #[allow(missing_docs)]
    Delete { name: usize },
    /// A Secret and ConfigMap of the tenant's, named as its claim `name` (or the victim's claim)
    /// and holding the victim's names.
    #[allow(missing_docs)]
    Squat { name: Option<usize> },
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Provisioner),
        Just(Value::New),
        Just(Value::Existing),
        Just(Value::Delete),
        Just(Value::Retain),
        Just(Value::True),
        Just(Value::VictimBucket),
        Just(Value::VictimClaim),
        Just(Value::VictimUid),
        Just(Value::VictimObjectBucket),
        Just(Value::TripwireUrl),
        Just(Value::ForgedState),
        Just(Value::ReadWrite),
        Just(Value::Garbage),
    ]
}

fn pairs(keys: usize, most: usize) -> impl Strategy<Value = Vec<(usize, Value)>> {
    prop::collection::vec((0..keys, value()), 0..=most)
}

fn action() -> impl Strategy<Value = Action> {
    let class = prop_oneof![Just(Class::Ours), Just(Class::Missing), Just(Class::Theirs)];
    let bucket = prop_oneof![Just(Bucket::Victims), Just(Bucket::Own), Just(Bucket::Generated)];
    prop_oneof![
        4 => (0..NAMES, class, bucket, pairs(ANNOTATIONS.len(), 6), pairs(CONFIG_KEYS.len(), 3),
            any::<bool>(), any::<bool>())
            .prop_map(|(name, class, bucket, annotations, config, finalizer, label)| {
                Action::Create { name, class, bucket, annotations, config, finalizer, label }
            }),
        2 => (0..NAMES, pairs(ANNOTATIONS.len(), 6))
            .prop_map(|(name, annotations)| Action::Annotate { name, annotations }),
        1 => (0..NAMES, pairs(CONFIG_KEYS.len(), 3))
            .prop_map(|(name, config)| Action::Configure { name, config }),
        2 => (0..NAMES).prop_map(|name| Action::Delete { name }),
        1 => prop::option::of(0..NAMES).prop_map(|name| Action::Squat { name }),
    ]
}

/// The actions of run `seed`, the same on every machine.
pub fn actions(seed: u64) -> Vec<Action> {
    generated(prop::collection::vec(action(), ACTIONS), seed)
}

/// What `strategy` generates from `seed`, the same on every machine.
pub fn generated<S: Strategy>(strategy: S, seed: u64) -> S::Value {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    strategy.new_tree(&mut runner).expect("generating actions").current()
}

/// What the tenant knows of its victim, and where it would like credentials sent.
pub struct World {
    /// The provisioner's name.
    pub provisioner: String,
    /// The operator's StorageClass for it.
    pub class: String,
    /// A StorageClass of another provisioner.
    pub theirs: String,
    /// The victim's bucket.
    pub victim_bucket: String,
    /// The victim claim's UID.
    pub victim_uid: String,
    /// An address of the tenant's, which nothing may connect to.
    pub tripwire: Tripwire,
    /// The victim's namespace.
    pub home_ns: String,
    /// A Secret (namespace, name) the provisioner must never read for a tenant: the operator's
    /// owner keys or admin token, else the victim's own; forged backend state names it.
    pub forged_secret: (String, String),
}

/// A tenant: a client whose rights end at its namespace, and its claims.
pub struct Tenant {
    /// The tenant's client.
    pub client: kube::Client,
    /// Its namespace.
    pub ns: String,
    /// Its claims.
    pub claims: Api<ObjectBucketClaim>,
}

impl World {
    fn resolve(&self, value: Value) -> String {
        match value {
            Value::Provisioner => self.provisioner.clone(),
            Value::New => "new".into(),
            Value::Existing => "existing".into(),
            Value::Delete => "Delete".into(),
            Value::Retain => "Retain".into(),
            Value::True => "true".into(),
            Value::VictimBucket => self.victim_bucket.clone(),
            Value::VictimClaim => "victim".into(),
            Value::VictimUid => self.victim_uid.clone(),
            Value::VictimObjectBucket => format!("obc-{}-victim", self.home_ns),
            Value::TripwireUrl => self.tripwire.url.clone(),
            Value::ForgedState => json!({
                "adminEndpoint": self.tripwire.url,
                "endpoint": self.tripwire.url,
                "iamEndpoint": self.tripwire.url,
                "secretName": self.forged_secret.1,
                "secretNamespace": self.forged_secret.0,
                "userName": format!("obc-{}", self.victim_uid),
                "bucketName": self.victim_bucket,
            })
            .to_string(),
            Value::ReadWrite => "ReadWrite".into(),
            Value::Garbage => "\u{0}{{not json".into(),
        }
    }

    fn map(&self, keys: &[&str], pairs: &[(usize, Value)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (keys[*k].to_string(), self.resolve(*v))).collect()
    }

    /// The name of the tenant's claim number `name`.
    pub fn claim_name(name: usize) -> String {
        format!("hostile-{name}")
    }
}

/// Carries out one action as `tenant`. Refusals by the apiserver are part of the game.
pub async fn act(world: &World, tenant: &Tenant, action: &Action) {
    let post = PostParams::default();
    let result = match action {
        Action::Create { name, class, bucket, annotations, config, finalizer, label } => {
            let name = World::claim_name(*name);
            let storage_class_name = match class {
                Class::Ours => world.class.clone(),
                Class::Missing => format!("missing-{}", world.provisioner.replace('/', "-")),
                Class::Theirs => world.theirs.clone(),
            };
            let (bucket_name, generate_bucket_name) = match bucket {
                Bucket::Victims => (Some(world.victim_bucket.clone()), None),
                Bucket::Own => (Some(format!("{name}-{}", tenant.ns)), None),
                Bucket::Generated => (None, Some("hostile".to_string())),
            };
            let config = world.map(CONFIG_KEYS, config);
            let claim = ObjectBucketClaim {
                metadata: ObjectMeta {
                    name: Some(name),
                    annotations: Some(world.map(ANNOTATIONS, annotations)),
                    finalizers: finalizer.then(|| vec![FINALIZER.to_string()]),
                    labels: label
                        .then(|| BTreeMap::from([(LABEL_PROVISIONER.into(), "anything".into())])),
                    ..Default::default()
                },
                spec: ObjectBucketClaimSpec {
                    storage_class_name,
                    bucket_name,
                    generate_bucket_name,
                    additional_config: (!config.is_empty()).then_some(config),
                    ..Default::default()
                },
                status: None,
            };
            tenant.claims.create(&post, &claim).await.map(drop)
        }
        Action::Annotate { name, annotations } => {
            let patch =
                json!({ "metadata": { "annotations": world.map(ANNOTATIONS, annotations) } });
            merge(tenant, *name, patch).await
        }
        Action::Configure { name, config } => {
            let patch = json!({ "spec": { "additionalConfig": world.map(CONFIG_KEYS, config) } });
            merge(tenant, *name, patch).await
        }
        Action::Delete { name } => tenant
            .claims
            .delete(&World::claim_name(*name), &DeleteParams::default())
            .await
            .map(drop),
        Action::Squat { name } => {
            let name = name.map_or_else(|| "victim".to_string(), World::claim_name);
            let data = BTreeMap::from([
                ("AWS_ACCESS_KEY_ID".to_string(), world.victim_uid.clone()),
                ("BUCKET_NAME".to_string(), world.victim_bucket.clone()),
                ("AWS_ENDPOINT_URL".to_string(), world.tripwire.url.clone()),
            ]);
            let meta = ObjectMeta { name: Some(name), ..Default::default() };
            let secret = Secret {
                metadata: meta.clone(),
                string_data: Some(data.clone()),
                ..Default::default()
            };
            let secrets = Api::<Secret>::namespaced(tenant.client.clone(), &tenant.ns);
            let config_map = ConfigMap { metadata: meta, data: Some(data), ..Default::default() };
            let config_maps = Api::<ConfigMap>::namespaced(tenant.client.clone(), &tenant.ns);
            let _ = config_maps.create(&post, &config_map).await;
            secrets.create(&post, &secret).await.map(drop)
        }
    };
    if let Err(error) = result {
        eprintln!("  refused: {error}");
    }
}

/// Merges `patch` into the tenant's claim `name`.
async fn merge(tenant: &Tenant, name: usize, patch: serde_json::Value) -> kube::Result<()> {
    let params = PatchParams::default();
    tenant.claims.patch(&World::claim_name(name), &params, &Patch::Merge(&patch)).await.map(drop)
}

/// Deletes every claim the tenant left and waits until each is gone: ours are let go by the
/// provisioner; one whose finalizer nobody serves (its class is nobody's here) the tenant
/// takes off itself, as it could all along.
pub async fn clear(tenant: &Tenant) {
    for name in (0..NAMES).map(World::claim_name) {
        let _ = tenant.claims.delete(&name, &DeleteParams::default()).await;
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    for claim in tenant.claims.list(&Default::default()).await.unwrap() {
        let patch = json!({ "metadata": { "finalizers": null } });
        let params = PatchParams::default();
        let _ = tenant.claims.patch(&claim.name_any(), &params, &Patch::Merge(&patch)).await;
    }
    eventually("the tenant's claims to be gone", || async {
        tenant.claims.list(&Default::default()).await.ok()?.items.is_empty().then_some(())
    })
    .await;
}

/// The seeds to run: `HOSTILE_FUZZ_SEEDS=7,8,9`, else `HOSTILE_FUZZ_RUNS` (default 2) from 1.
pub fn seeds() -> Vec<u64> {
    if let Ok(seeds) = std::env::var("HOSTILE_FUZZ_SEEDS") {
        return seeds
            .split(',')
            .map(|s| s.trim().parse().expect("HOSTILE_FUZZ_SEEDS: numbers"))
            .collect();
    }
    let runs = std::env::var("HOSTILE_FUZZ_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(2);
    (1..=runs).collect()
}

impl Tenant {
    /// A tenant of a new namespace named after `prefix`, whose rights end there (claims,
    /// Secrets and ConfigMaps; see [`claim_tenant`]).
    pub async fn scoped(admin: &kube::Client, prefix: &str) -> Tenant {
        let ns = test_namespace(admin, prefix).await;
        let client = claim_tenant(ControlPlane::shared(), &ns).await.unwrap();
        Tenant { claims: Api::namespaced(client.clone(), &ns), client, ns }
    }
}

/// A StorageClass named after `name` of a provisioner that is nobody's here.
pub async fn foreign_class(admin: &kube::Client, name: &str) -> String {
    let provisioner = "someone-else.example/bucket";
    bucket_class(admin, name, provisioner, BTreeMap::new(), Some("Delete")).await
}

/// Plays run `seed` as `tenant` (its [`actions`], then [`clear`]) and checks that nothing
/// connected to the tenant's address; what the victim kept is the caller's to check.
pub async fn play(world: &World, tenant: &Tenant, seed: u64) {
    let actions = actions(seed);
    eprintln!("seed {seed}: {actions:#?}");
    for action in &actions {
        act(world, tenant, action).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    clear(tenant).await;
    world.tripwire.assert_untouched(&format!("seed {seed}"));
}
