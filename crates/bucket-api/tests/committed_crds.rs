//! The CRDs committed under `crds/` must be exactly what the types generate.

use std::path::Path;

#[test]
fn committed_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    for file in bucket_api::crd_files() {
        let path = dir.join(&file.file_name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{} is missing ({e}); run `make crds`", path.display()));
        assert!(
            committed == file.to_yaml(),
            "{} differs from what the types generate; run `make crds` and commit the result",
            path.display()
        );
    }
}

#[test]
fn crds_are_structural_and_served() {
    for file in bucket_api::crd_files() {
        let spec = &file.crd.spec;
        assert!(
            ["objectbucket.io", bucket_api::SHARING_GROUP].contains(&spec.group.as_str()),
            "{}",
            spec.group
        );
        let version = &spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.served && version.storage);
        let schema = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
        assert_eq!(schema.and_then(|s| s.type_.as_deref()), Some("object"), "{}", file.file_name);
        assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
    }
}
