//! The v1alpha2 services (`sigs.k8s.io.cosi.v1alpha2.Identity` and `.Provisioner`): messages to
//! and from [`Driver`] calls. Only S3 is served.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bucket_api::AccessMode;
use bucket_provisioner::Provisioner;
use bucket_provisioner::bucket::standalone::BucketLocation;
use tonic::{Request, Response, Status};

use crate::calls::{Auth, BucketAnswer, Driver};
use crate::proto::v1alpha2 as pb;
use crate::status::{CallError, refused};
use crate::tenancy::Version;

use pb::object_protocol::Type as ProtocolType;

/// Both v1alpha2 services over one driver.
pub struct V1alpha2<P>(pub Arc<Driver<P>>);

fn sorted(map: &HashMap<String, String>) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn s3_only(field: &str, protocols: &[pb::ObjectProtocol]) -> Result<(), CallError> {
    match protocols.iter().find(|p| p.r#type() != ProtocolType::S3) {
        None => Ok(()),
        Some(other) => Err(CallError::InvalidArgument(format!(
            "{field}: protocol {} is not served; this driver serves S3 only",
            other.r#type().as_str_name()
        ))),
    }
}

fn s3_info(location: &BucketLocation) -> pb::ObjectProtocolAndBucketInfo {
    pb::ObjectProtocolAndBucketInfo {
        s3: Some(pb::S3BucketInfo {
            bucket_id: location.bucket_name.clone(),
            endpoint: location.endpoint.url(),
            region: location.endpoint.region.clone(),
            addressing_style: Some(pb::S3AddressingStyle {
                style: pb::s3_addressing_style::Style::Path.into(),
            }),
        }),
        azure: None,
        gcs: None,
    }
}

fn bucket_response(answer: BucketAnswer) -> (String, Option<pb::ObjectProtocolAndBucketInfo>) {
    let info = s3_info(&answer.location);
    (answer.bucket_id, Some(info))
}

/// Each bucket id asked, with its mode.
type AskedBuckets = Vec<(String, Option<AccessMode>)>;

/// What a grant asks, read from its message: the authentication and each bucket's mode.
fn grant_terms(
    request: &pb::DriverGrantBucketAccessRequest,
) -> Result<(Auth, AskedBuckets), CallError> {
    let protocol = request.protocol.map(|p| p.r#type()).unwrap_or(ProtocolType::Unknown);
    if protocol != ProtocolType::S3 {
        return Err(CallError::InvalidArgument(format!(
            "protocol {}: this driver serves S3 only",
            protocol.as_str_name()
        )));
    }
    use pb::authentication_type::Type as AuthType;
    let auth = match request.authentication_type.map(|a| a.r#type()) {
        Some(AuthType::Key) => Auth::Key,
        Some(AuthType::ServiceAccount) => Auth::Identity,
        _ => Auth::Unknown,
    };
    let mut buckets = Vec::with_capacity(request.buckets.len());
    for (i, bucket) in request.buckets.iter().enumerate() {
        use pb::access_mode::Mode;
        let mode = match bucket.access_mode.map(|m| m.mode()) {
            Some(Mode::ReadWrite) => AccessMode::ReadWrite,
            Some(Mode::ReadOnly) => AccessMode::ReadOnly,
            Some(Mode::WriteOnly) => AccessMode::WriteOnly,
            _ => {
                return Err(CallError::InvalidArgument(format!(
                    "buckets[{i}].access_mode is not set; ask READ_WRITE, READ_ONLY or WRITE_ONLY"
                )));
            }
        };
        buckets.push((bucket.bucket_id.clone(), Some(mode)));
    }
    Ok((auth, buckets))
}

#[tonic::async_trait]
impl<P: Provisioner> pb::identity_server::Identity for V1alpha2<P> {
    async fn driver_get_info(
        &self,
        _: Request<pb::DriverGetInfoRequest>,
    ) -> Result<Response<pb::DriverGetInfoResponse>, Status> {
        Ok(Response::new(pb::DriverGetInfoResponse {
            name: self.0.name().to_owned(),
            supported_protocols: vec![pb::ObjectProtocol { r#type: ProtocolType::S3.into() }],
        }))
    }
}

#[tonic::async_trait]
impl<P: Provisioner> pb::provisioner_server::Provisioner for V1alpha2<P> {
    async fn driver_create_bucket(
        &self,
        request: Request<pb::DriverCreateBucketRequest>,
    ) -> Result<Response<pb::DriverCreateBucketResponse>, Status> {
        let request = request.into_inner();
        let answer = match s3_only("protocols", &request.protocols) {
            Ok(()) => self.0.create_bucket(&request.name, &sorted(&request.parameters)).await,
            Err(e) => Err(e),
        }
        .map_err(|e| refused("DriverCreateBucket", &request.name, e))?;
        let (bucket_id, protocols) = bucket_response(answer);
        Ok(Response::new(pb::DriverCreateBucketResponse { bucket_id, protocols }))
    }

    async fn driver_get_existing_bucket(
        &self,
        request: Request<pb::DriverGetExistingBucketRequest>,
    ) -> Result<Response<pb::DriverGetExistingBucketResponse>, Status> {
        let request = request.into_inner();
        s3_only("protocols", &request.protocols)?;
        let answer = self
            .0
            .existing_bucket(&request.existing_bucket_id, &sorted(&request.parameters))
            .await?;
        let (bucket_id, protocols) = bucket_response(answer);
        Ok(Response::new(pb::DriverGetExistingBucketResponse { bucket_id, protocols }))
    }

    async fn driver_delete_bucket(
        &self,
        request: Request<pb::DriverDeleteBucketRequest>,
    ) -> Result<Response<pb::DriverDeleteBucketResponse>, Status> {
        let id = request.into_inner().bucket_id;
        self.0
            .delete_bucket(Version::V1alpha2, &id)
            .await
            .map_err(|e| refused("DriverDeleteBucket", &id, e))?;
        Ok(Response::new(pb::DriverDeleteBucketResponse {}))
    }

    async fn driver_grant_bucket_access(
        &self,
        request: Request<pb::DriverGrantBucketAccessRequest>,
    ) -> Result<Response<pb::DriverGrantBucketAccessResponse>, Status> {
        let request = request.into_inner();
        let answer = match grant_terms(&request) {
            Ok((auth, buckets)) => {
                let (account, parameters) = (&request.account_name, sorted(&request.parameters));
                self.0.grant(Version::V1alpha2, account, auth, &buckets, &parameters).await
            }
            Err(e) => Err(e),
        }
        .map_err(|e| refused("DriverGrantBucketAccess", &request.account_name, e))?;
        let endpoint = &answer.key.endpoint;
        let infos = answer
            .buckets
            .iter()
            .map(|(id, name)| pb::driver_grant_bucket_access_response::BucketInfo {
                bucket_id: id.clone(),
                bucket_info: Some(s3_info(&BucketLocation {
                    bucket_name: name.clone(),
                    endpoint: endpoint.clone(),
                })),
            })
            .collect();
        Ok(Response::new(pb::DriverGrantBucketAccessResponse {
            account_id: answer.account_id,
            buckets: infos,
            credentials: Some(pb::CredentialInfo {
                s3: Some(pb::S3CredentialInfo {
                    access_key_id: answer.key.credentials.access_key_id.clone(),
                    access_secret_key: answer.key.credentials.secret_access_key.clone(),
                }),
                azure: None,
                gcs: None,
            }),
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
