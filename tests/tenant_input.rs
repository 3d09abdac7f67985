//! What a tenant wrote reaches a backend only as `TenantWritten`, read with `requested()`; no
//! function of a backend that reads it also names an address, a Secret or a deletion. The
//! compiler makes every read of tenant input visible; this test reads those places.

use std::path::{Path, PathBuf};

use test_support::source_files::rust_files;

/// What must never be chosen by tenant input: where a credential goes, which Secret is read,
/// what is deleted.
const SINKS: &[&str] = &[
    "ServiceUrl",
    "SecretRef",
    "secret_data(",
    "Api<Secret>",
    "Api::<Secret>",
    "endpoint_url(",
    ".delete_",
    "remove_",
    "revoke_",
];

/// Parts of a claim no backend reads at all: the library alone interprets them.
const CLAIM_METADATA_READ_BY_THE_LIBRARY_ONLY: &[&str] =
    &["annotations", "labels", "finalizers", "owner_references"];

/// The functions of `text` (a chunk from one `fn` to the next) that read tenant input and name a
/// sink, or read claim metadata only the library may, as `name: why`.
fn violations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for chunk in functions(text) {
        let name = chunk.split(['(', '<']).next().unwrap_or_default().trim().to_owned();
        let reads: Vec<&str> =
            chunk.match_indices("requested()").map(|(i, _)| &chunk[i..]).collect();
        if reads.is_empty() {
            continue;
        }
        for sink in SINKS {
            if chunk.contains(sink) {
                found.push(format!("{name}: reads tenant input and names {sink}"));
            }
        }
        for read in reads {
            let path: String =
                read.chars().take_while(|c| !c.is_whitespace() && *c != ';').collect();
            for part in CLAIM_METADATA_READ_BY_THE_LIBRARY_ONLY {
                if path.contains(&format!(".{part}")) {
                    found.push(format!("{name}: reads the claim's {part}"));
                }
            }
        }
    }
    found
}

/// `text` cut before every `fn `: each piece after the first starts with a function's name.
fn functions(text: &str) -> impl Iterator<Item = &str> {
    text.split("fn ").skip(1)
}

fn backend_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["garage-provisioner", "hostpath-provisioner", "s3-provisioner", "cosi-driver"] {
        rust_files(&root.join("crates").join(dir).join("src"), &mut files);
    }
    rust_files(&root.join("examples"), &mut files);
    files
}

#[test]
fn no_backend_lets_tenant_input_choose_an_address_a_secret_or_a_deletion() {
    let files = backend_sources();
    assert!(files.len() > 50, "the backends' sources were not found: {files:?}");
    let mut failures = Vec::new();
    let mut reads = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        reads += text.matches("requested()").count();
        failures.extend(violations(&text).into_iter().map(|v| format!("{}: {v}", file.display())));
    }
    assert!(reads > 0, "no backend reads tenant input any more: is this test still needed?");
    assert!(failures.is_empty(), "tenant input next to a sink:\n{}", failures.join("\n"));
}

#[test]
fn the_check_finds_tenant_input_next_to_a_sink() {
    let endpoint = r#"
        fn connect(options: &BucketOptions) -> Result<ServiceUrl, BackendError> {
            let asked = options.additional_config.requested().get("endpoint").unwrap();
            ServiceUrl::parse("endpoint", asked, "http://s3:9000")
        }
        fn quota(options: &BucketOptions) -> u64 {
            options.additional_config.requested().len() as u64
        }
    "#;
    assert_eq!(violations(endpoint), ["connect: reads tenant input and names ServiceUrl"]);
    let annotations = r#"
        fn state(options: &BucketOptions) -> String {
            options.claim.requested().metadata.annotations.clone().unwrap_or_default().len().to_string()
        }
    "#;
    assert_eq!(violations(annotations), ["state: reads the claim's annotations"]);
    let deletion = r#"
        async fn cleanup(&self, options: &BucketOptions) {
            let user = options.claim.requested().spec.bucket_name.clone();
            self.iam.delete_user(user).await;
        }
    "#;
    assert_eq!(violations(deletion), ["cleanup: reads tenant input and names .delete_"]);
}
