//! The hand-written tables of StorageClass parameters and `additionalConfig` keys, held to the
//! lists the code accepts. Each row of such a page is `` | `name` | read by | ... | ``, where
//! "read by" names, comma-separated, who accepts it: `controller` (the library, for every bucket
//! backend, before a backend sees the rest), `hostPath`, `S3`, `Garage`, `hostPath volumes`.

use std::collections::{BTreeMap, BTreeSet};

use bucket_api::contract;
use test_support::reference::reference_file;

/// Who reads a name, as the pages spell it.
pub type Readers = BTreeMap<String, BTreeSet<&'static str>>;

fn add(into: &mut Readers, names: &[&str], reader: &'static str) {
    for name in names {
        into.entry((*name).to_owned()).or_default().insert(reader);
    }
}

/// Every StorageClass parameter and who accepts it, from the code's own lists.
pub fn class_parameters() -> Readers {
    let mut readers = Readers::new();
    let controller: Vec<&str> = [contract::STORAGE_CLASS_BUCKET_NAME]
        .into_iter()
        .chain(contract::class_limits::ALL)
        .chain(contract::class_rotation::ALL)
        .chain(contract::class_sharing::ALL)
        .chain(contract::class_web_identity::ALL)
        .collect();
    add(&mut readers, &controller, "controller");
    add(&mut readers, &hostpath_provisioner::cors::PARAMETERS, "hostPath");
    add(&mut readers, &s3_provisioner::params::PARAMETERS, "S3");
    add(&mut readers, &garage_provisioner::params::PARAMETERS, "Garage");
    add(&mut readers, &hostpath_volume_provisioner::PARAMETERS, "hostPath volumes");
    readers
}

/// Every `additionalConfig` key of a claim and who accepts it, from the code's own lists.
pub fn claim_keys() -> Readers {
    let mut readers = Readers::new();
    let controller = [
        contract::CLAIM_ACCESS_MODE,
        contract::CLAIM_SHARE_FROM,
        contract::CLAIM_SERVICE_ACCOUNT_NAME,
    ];
    add(&mut readers, &controller, "controller");
    add(&mut readers, &hostpath_provisioner::quota::ACCEPTED, "hostPath");
    add(&mut readers, &s3_provisioner::config::ACCEPTED, "S3");
    add(&mut readers, &garage_provisioner::quota::ACCEPTED, "Garage");
    add(&mut readers, &garage_provisioner::features::KEYS, "Garage");
    readers
}

const READERS: [&str; 5] = ["controller", "hostPath", "S3", "Garage", "hostPath volumes"];

/// The rows of a page: the name in the first cell's code span, the readers in the second.
fn rows(page: &str) -> Readers {
    let mut found = Readers::new();
    for line in page.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let name = cells[0].trim_start_matches("| `").trim_end_matches('`').to_owned();
        let readers = cells.get(1).copied().unwrap_or_default();
        let readers: BTreeSet<&'static str> = readers
            .split(',')
            .map(str::trim)
            .map(|r| {
                READERS.into_iter().find(|known| *known == r).unwrap_or_else(|| {
                    panic!("{name}: {r:?} is none of {READERS:?}");
                })
            })
            .collect();
        assert!(found.insert(name.clone(), readers).is_none(), "{name} has two rows");
    }
    found
}

/// The rows of `docs/src/reference/<relative>` are exactly `expected`, name for name and reader
/// for reader.
pub fn check_page(relative: &str, expected: &Readers) {
    let path = reference_file(relative);
    let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let documented = rows(&page);
    let mut wrong = Vec::new();
    for (name, readers) in expected {
        match documented.get(name) {
            None => wrong.push(format!("{name} (read by {readers:?}) has no row")),
            Some(listed) if listed != readers => {
                wrong.push(format!("{name} is read by {readers:?}, the page says {listed:?}"))
            }
            Some(_) => {}
        }
    }
    for name in documented.keys().filter(|n| !expected.contains_key(*n)) {
        wrong.push(format!("{name} has a row, but nothing in the code accepts it"));
    }
    assert!(wrong.is_empty(), "docs/src/reference/{relative} and the code disagree: {wrong:#?}");
}
