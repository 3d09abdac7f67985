//! One COSI world for the hostPath driver: `test_support::cosi_world`'s, with
//! `hostpath-bucket-provisioner` keeping its buckets under a root of its own and serving S3 on
//! loopback.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use aws_sdk_s3::Client as S3;
use aws_sdk_s3::config::{Credentials, Region};
use kube::api::{Api, DynamicObject};
use test_support::cosi::CosiVersion;
use test_support::cosi_world::{COSI_WAIT, CosiWorld, DriverBinary};
use test_support::{Deployed, S3Access};

/// A running world; everything stops when it is dropped.
pub struct World {
    world: CosiWorld,
    /// The root the driver keeps its buckets under.
    pub root: tempfile::TempDir,
}

impl Deref for World {
    type Target = CosiWorld;

    fn deref(&self) -> &CosiWorld {
        &self.world
    }
}

impl DerefMut for World {
    fn deref_mut(&mut self) -> &mut CosiWorld {
        &mut self.world
    }
}

impl World {
    pub async fn start(version: CosiVersion) -> World {
        let root = tempfile::tempdir().unwrap();
        let s3_port = test_support::free_port().unwrap();
        let driver = DriverBinary {
            program: env!("CARGO_BIN_EXE_hostpath-bucket-provisioner").into(),
            args: vec![
                format!("--root={}", root.path().display()),
                format!("--s3-listen=127.0.0.1:{s3_port}"),
                "--endpoint-host=127.0.0.1".into(),
            ],
            store: BTreeMap::new(),
        };
        let world = CosiWorld::start(version, Deployed::CosiHostPath, "hostpath", driver);
        World { world: world.await.unwrap(), root }
    }

    /// The directory a bucket lives in on the driver's disk.
    pub fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.root.path().join("buckets").join(bucket)
    }
}

/// Polls object `name` until `check` yields a value (see `cosi_world::wait_for`).
pub async fn wait_for<T>(
    api: &Api<DynamicObject>,
    name: &str,
    check: impl Fn(&DynamicObject) -> Option<T>,
) -> Result<T, String> {
    test_support::cosi_world::wait_for(api, name, COSI_WAIT, check).await
}

/// An S3 client made from nothing but an access Secret.
pub fn s3_client(access: &S3Access) -> S3 {
    let credentials = Credentials::new(
        &access.access_key_id,
        &access.secret_access_key,
        None,
        None,
        "cosi-access",
    );
    let http = aws_smithy_http_client::Builder::new().build_http();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(http)
        .region(Region::new(access.region.clone()))
        .endpoint_url(&access.endpoint)
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    S3::from_conf(config)
}
