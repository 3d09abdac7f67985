//! The COSI front's requests as the driver hands them to a backend, for backends' tests.

use std::collections::BTreeMap;

use bucket_api::AccessMode;
use bucket_provisioner::bucket::standalone::{
    KeyBucket, KeyRequest, NewBucket, Quotas, cosi_account_id, cosi_bucket_owner,
};

/// A new bucket `name`, its owner id derived from `asked` (the class parameters the request
/// carried) as the driver derives it; no backend parameters, no quotas.
pub fn new_bucket(name: &str, asked: &[(&str, &str)]) -> NewBucket {
    let asked: BTreeMap<String, String> =
        asked.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    NewBucket {
        bucket_name: name.to_owned(),
        owner_id: cosi_bucket_owner(name, &asked),
        parameters: BTreeMap::new(),
        quotas: Quotas::default(),
    }
}

/// A key for access `access` with each bucket's mode; no parameters, quotas or ServiceAccounts.
pub fn key_request(access: &str, buckets: &[(&str, AccessMode)]) -> KeyRequest {
    KeyRequest {
        owner_id: cosi_account_id(access),
        buckets: buckets
            .iter()
            .map(|(name, mode)| KeyBucket { bucket_name: (*name).to_owned(), access_mode: *mode })
            .collect(),
        parameters: BTreeMap::new(),
        quotas: Quotas::default(),
        web_identity: None,
    }
}
