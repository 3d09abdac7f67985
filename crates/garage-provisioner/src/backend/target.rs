//! Which Garage cluster a cleanup works on, and through which endpoints.
//!
//! An ObjectBucket records the settings its bucket was made with and the identity of the
//! cluster holding it ([`STATE_CLUSTER_ID`], see [`crate::identity`]). A cleanup tries the
//! StorageClass's endpoints as they are now (where an operator points a cluster that moved, or
//! the nodes left after one was lost), then the recorded ones, and goes on only through a
//! cluster of that identity: any other would find neither bucket nor key and report them gone
//! while they live on where they are.
//!
//! An ObjectBucket recorded without an identity (written before identities were recorded, or
//! only the settings saved before the bucket was made) is cleaned up where it was made; while
//! that does not answer, through the class's endpoints, once that cluster shows the claim's
//! key, or its bucket with the claim's ownership record.

use bucket_api::ObjectBucket;
use bucket_provisioner::{BackendError, Credentials, user_id_of};

use super::{GarageProvisioner, bucket_name, store};
use crate::identity::{STATE_CLUSTER_ID, cluster_id, provisioner_key};
use crate::names::claim_key_id;
use crate::params::Settings;
use crate::store::{Store, creator};

/// The cluster a cleanup works on.
pub(super) struct Target {
    /// How it is reached.
    pub settings: Settings,
    /// The admin token.
    pub token: String,
    /// The provisioner's key there, when it was read on the way.
    pub service: Option<Credentials>,
}

/// Where a candidate came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Recorded,
    Class,
}

impl GarageProvisioner {
    /// The cluster holding `bucket`'s bucket and key, reached through the first candidate that
    /// proves to be it; a transient error saying what each candidate was when none is.
    pub(super) async fn cleanup_target(
        &self,
        bucket: &ObjectBucket,
    ) -> Result<Target, BackendError> {
        let state = bucket.spec.additional_state.clone().unwrap_or_default();
        let recorded = if state.is_empty() { None } else { Some(Settings::from_state(&state)?) };
        let class_name = &bucket.spec.storage_class_name;
        let class = self.class_settings(class_name).await;
        let expected = state.get(STATE_CLUSTER_ID).filter(|id| !id.is_empty());
        let mut candidates = match expected {
            Some(_) => vec![(Source::Class, class), (Source::Recorded, recorded)],
            None => vec![(Source::Recorded, recorded), (Source::Class, class)],
        };
        let mut seen = Vec::new();
        candidates.retain(|(_, settings)| match settings {
            Some(settings) if !seen.contains(&settings.admin) => {
                seen.push(settings.admin.clone());
                true
            }
            _ => false,
        });
        if candidates.is_empty() {
            return Err(unknown(bucket));
        }
        let only_class = candidates.iter().all(|(source, _)| *source == Source::Class);
        let mut missed = Vec::new();
        for (source, settings) in candidates {
            let Some(settings) = settings else { continue };
            let token = match self.cleanup_token(&settings).await {
                Ok(token) => token,
                Err(e) => {
                    missed.push(e.to_string());
                    continue;
                }
            };
            let store = store(&self.http, &settings, &token);
            let service = match provisioner_key(&store).await {
                Ok(service) => service,
                Err(e) => {
                    missed.push(e.to_string());
                    continue;
                }
            };
            let found = service.as_ref().map(cluster_id);
            let accepted = match expected {
                Some(id) => found.as_ref() == Some(id),
                // Where it was made, or the class when nothing else is known: as before.
                None if source == Source::Recorded || only_class => true,
                None => holds_claim(&store, bucket, service.as_ref()).await?,
            };
            if accepted {
                return Ok(Target { settings, token, service });
            }
            missed.push(match (expected, found) {
                (Some(_), Some(other)) => {
                    format!("{} reach Garage cluster {other}", settings.admin)
                }
                (Some(_), None) => format!(
                    "{} reach a Garage cluster this provisioner never worked with",
                    settings.admin
                ),
                (None, _) => format!(
                    "{} reach a Garage cluster that holds neither the claim's key nor its bucket",
                    settings.admin
                ),
            });
        }
        let which = match expected {
            Some(id) => format!("Garage cluster {id}"),
            None => "the Garage cluster".to_string(),
        };
        Err(BackendError::transient(format!(
            "{which} holding bucket {:?} is not reached: {}; name its nodes' admin endpoints in \
             StorageClass {class_name:?} (parameter adminEndpoint)",
            bucket_name(bucket),
            missed.join("; ")
        )))
    }

    /// The StorageClass's settings as they are now (as last seen when it cannot be read), if
    /// it names a cluster this backend can use.
    async fn class_settings(&self, class: &str) -> Option<Settings> {
        let live = match &self.classes {
            Some(classes) => classes.class_parameters(class).await.ok().flatten(),
            None => None,
        };
        let parameters = live
            .or_else(|| self.seen.lock().unwrap_or_else(|e| e.into_inner()).get(class).cloned())?;
        Settings::from_parameters(&parameters).ok()
    }
}

/// Whether the cluster `store` reaches shows the claim of `bucket`: its key, or its bucket
/// with its ownership record.
async fn holds_claim(
    store: &Store<'_>,
    bucket: &ObjectBucket,
    service: Option<&Credentials>,
) -> Result<bool, BackendError> {
    let Some(user_id) = user_id_of(bucket) else { return Ok(false) };
    if store.key_exists(&claim_key_id(&user_id)).await? {
        return Ok(true);
    }
    let (Some(service), name) = (service, bucket_name(bucket)) else { return Ok(false) };
    if name.is_empty() {
        return Ok(false);
    }
    Ok(store.bucket(&name).await?.is_some_and(|info| {
        creator(&info, &service.access_key_id).is_some_and(|(c, _)| c == user_id)
    }))
}

fn unknown(bucket: &ObjectBucket) -> BackendError {
    let class = &bucket.spec.storage_class_name;
    BackendError::permanent(
        "BucketSettingsUnknown",
        format!(
            "nothing records which Garage cluster holds bucket {:?} (its StorageClass {class:?} \
             is gone); remove the bucket and key {:?} by hand if they exist",
            bucket_name(bucket),
            user_id_of(bucket).map(|u| claim_key_id(&u)).unwrap_or_default()
        ),
    )
}
