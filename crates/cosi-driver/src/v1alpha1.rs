//! The v1alpha1 services (`cosi.v1alpha1.Identity`, `cosi.v1alpha1.Provisioner`): messages to
//! and from [`Driver`] calls.

use std::collections::HashMap;
use std::sync::Arc;

use bucket_provisioner::Provisioner;
use tonic::{Request, Response, Status};

use crate::calls::{Auth, Driver};
use crate::proto::v1alpha1 as pb;
use crate::status::refused;
use crate::tenancy::Version;

/// The keys of the S3 credential details the v0.2.2 sidecar copies into `BucketInfo`.
pub mod secret_keys {
    /// The protocol's entry in the credentials map.
    pub const S3: &str = "s3";
    /// The endpoint URL.
    pub const ENDPOINT: &str = "endpoint";
    /// The region.
    pub const REGION: &str = "region";
    /// The access key id.
    pub const ACCESS_KEY_ID: &str = "accessKeyID";
    /// The secret access key.
    pub const ACCESS_SECRET_KEY: &str = "accessSecretKey";
}

/// Both v1alpha1 services over one driver.
pub struct V1alpha1<P>(pub Arc<Driver<P>>);

fn sorted(map: &HashMap<String, String>) -> std::collections::BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[tonic::async_trait]
impl<P: Provisioner> pb::identity_server::Identity for V1alpha1<P> {
    async fn driver_get_info(
        &self,
        _: Request<pb::DriverGetInfoRequest>,
    ) -> Result<Response<pb::DriverGetInfoResponse>, Status> {
        Ok(Response::new(pb::DriverGetInfoResponse { name: self.0.name().to_owned() }))
    }
}

#[tonic::async_trait]
impl<P: Provisioner> pb::provisioner_server::Provisioner for V1alpha1<P> {
    async fn driver_create_bucket(
        &self,
        request: Request<pb::DriverCreateBucketRequest>,
    ) -> Result<Response<pb::DriverCreateBucketResponse>, Status> {
        let request = request.into_inner();
        let answer = self
            .0
            .create_bucket(&request.name, &sorted(&request.parameters))
            .await
            .map_err(|e| refused("DriverCreateBucket", &request.name, e))?;
        let s3 = pb::S3 {
            region: answer.location.endpoint.region.clone(),
            signature_version: pb::S3SignatureVersion::S3v4.into(),
        };
        Ok(Response::new(pb::DriverCreateBucketResponse {
            bucket_id: answer.bucket_id,
            bucket_info: Some(pb::Protocol { r#type: Some(pb::protocol::Type::S3(s3)) }),
        }))
    }

    async fn driver_delete_bucket(
        &self,
        request: Request<pb::DriverDeleteBucketRequest>,
    ) -> Result<Response<pb::DriverDeleteBucketResponse>, Status> {
        let id = request.into_inner().bucket_id;
        self.0
            .delete_bucket(Version::V1alpha1, &id)
            .await
            .map_err(|e| refused("DriverDeleteBucket", &id, e))?;
        Ok(Response::new(pb::DriverDeleteBucketResponse {}))
    }

    async fn driver_grant_bucket_access(
        &self,
        request: Request<pb::DriverGrantBucketAccessRequest>,
    ) -> Result<Response<pb::DriverGrantBucketAccessResponse>, Status> {
        let request = request.into_inner();
        let auth = match request.authentication_type() {
            pb::AuthenticationType::Key => Auth::Key,
            pb::AuthenticationType::Iam => Auth::Identity,
            pb::AuthenticationType::UnknownAuthenticationType => Auth::Unknown,
        };
        let buckets = [(request.bucket_id.clone(), None)];
        let answer = self
            .0
            .grant(Version::V1alpha1, &request.name, auth, &buckets, &sorted(&request.parameters))
            .await
            .map_err(|e| refused("DriverGrantBucketAccess", &request.name, e))?;
        let endpoint = &answer.key.endpoint;
        let secrets = HashMap::from([
            (secret_keys::ENDPOINT.to_owned(), endpoint.url()),
            (secret_keys::REGION.to_owned(), endpoint.region.clone()),
            (secret_keys::ACCESS_KEY_ID.to_owned(), answer.key.credentials.access_key_id.clone()),
            (
                secret_keys::ACCESS_SECRET_KEY.to_owned(),
                answer.key.credentials.secret_access_key.clone(),
            ),
        ]);
        // An access of IAM holds no key: its ServiceAccount assumes the role, which the access's
        // status.accountID names (v1alpha1's BucketInfo has no field for it).
        let account_id = match &answer.key.web_identity {
            Some(identity) => identity.role_arn.clone(),
            None => answer.account_id,
        };
        Ok(Response::new(pb::DriverGrantBucketAccessResponse {
            account_id,
            credentials: HashMap::from([(
                secret_keys::S3.to_owned(),
                pb::CredentialDetails { secrets },
            )]),
        }))
    }

    async fn driver_revoke_bucket_access(
        &self,
        request: Request<pb::DriverRevokeBucketAccessRequest>,
    ) -> Result<Response<pb::DriverRevokeBucketAccessResponse>, Status> {
        let id = request.into_inner().account_id;
        self.0.revoke(&id).await.map_err(|e| refused("DriverRevokeBucketAccess", &id, e))?;
        Ok(Response::new(pb::DriverRevokeBucketAccessResponse {}))
    }
}
