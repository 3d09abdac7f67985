//! The generated messages, services and clients of both protocol versions.
#![allow(missing_docs, clippy::all)]

/// `cosi.v1alpha1`, as released in v0.2.2.
pub mod v1alpha1 {
    tonic::include_proto!("cosi.v1alpha1");
}

/// `sigs.k8s.io.cosi.v1alpha2`, as on the upstream main branch.
pub mod v1alpha2 {
    tonic::include_proto!("sigs.k8s.io.cosi.v1alpha2");
}
