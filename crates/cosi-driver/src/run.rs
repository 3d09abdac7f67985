//! What a provisioner binary adds to serve COSI: its flags, and the run of the driver beside
//! (or instead of) the objectbucket.io controller, supervised by the same runtime.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use bucket_provisioner::Provisioner;
use bucket_provisioner::runtime::{ControllerArgs, Process, RunError, Service, serve_only};

use crate::calls::Driver;
use crate::ready_repair::run_ready_repair;
use crate::server::{ServeError, bind, serve_on};
use crate::store_flags::parse_store_parameters;
use crate::tenancy_kube::KubeLookup;

/// The COSI flags every provisioner binary takes.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CosiArgs {
    /// Serve the COSI driver (v1alpha1 and v1alpha2) on this socket, e.g.
    /// `unix:///var/lib/cosi/cosi.sock`; without it, no COSI.
    #[arg(long, env = "COSI_ENDPOINT")]
    pub cosi_endpoint: Option<String>,
    /// The driver's name, which BucketClasses and BucketAccessClasses name as `driverName`
    /// (default: the backend's).
    #[arg(long, env = "COSI_DRIVER_NAME")]
    pub cosi_driver_name: Option<String>,
    /// Serve COSI alone, without the objectbucket.io controller.
    #[arg(long, env = "COSI_ONLY", requires = "cosi_endpoint")]
    pub cosi_only: bool,
    /// The store the COSI side serves, as one of the backend's StorageClasses would name it
    /// (`key=value`, repeated), for backends that serve several stores (S3, Garage).
    #[arg(long = "cosi-parameter", value_name = "KEY=VALUE", requires = "cosi_endpoint")]
    pub cosi_parameters: Vec<String>,
}

/// Why a binary could not start or ended.
#[derive(Debug, thiserror::Error)]
pub enum CosiRunError {
    /// A COSI flag is wrong.
    #[error("--cosi-driver-name: {0}")]
    DriverName(String),
    /// The socket could not be made.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The runtime ended.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `--cosi-parameter` entries that do not name a store the backend can serve.
    #[error("--cosi-parameter: {0}")]
    Parameters(String),
}

impl CosiArgs {
    /// The `--cosi-parameter` entries as a map, when COSI is served; `None` without
    /// `--cosi-endpoint`.
    pub fn store_parameters(&self) -> Result<Option<BTreeMap<String, String>>, CosiRunError> {
        if self.cosi_endpoint.is_none() {
            return Ok(None);
        }
        parse_store_parameters(&self.cosi_parameters).map(Some).map_err(CosiRunError::Parameters)
    }

    /// The driver's service, when `--cosi-endpoint` is set: the socket is bound now, so that a
    /// wrong endpoint stops the binary at once; every grant is checked against the cluster's
    /// objects with the process's client (see [`crate::tenancy`]), and v1alpha1 claims the
    /// upstream controller left unready are repaired beside it ([`crate::ready_repair`]).
    pub fn service<P: Provisioner>(
        &self,
        backend: Arc<P>,
        default_name: &str,
    ) -> Result<Option<Service>, CosiRunError> {
        let Some(endpoint) = &self.cosi_endpoint else { return Ok(None) };
        let name = self.cosi_driver_name.clone().unwrap_or_else(|| default_name.to_owned());
        let driver = Driver::new(backend, name).map_err(CosiRunError::DriverName)?;
        let listener = bind(endpoint)?;
        tracing::info!(endpoint, driver = driver.name(), "COSI socket bound");
        let name = driver.name().to_owned();
        Ok(Some(Service::new("COSI driver", move |process: Process| async move {
            // Beside the socket: v0.2.2's controller can leave a claim unready for good.
            let repair = run_ready_repair(process.client.clone(), name, process.stop.wait());
            let repair = tokio::spawn(repair);
            let lookup = KubeLookup::new(process.client.clone());
            let served =
                serve_on(driver.with_lookup(Arc::new(lookup)), listener, process.stop.wait()).await;
            repair.abort();
            served
        })))
    }
}

/// Runs `backend` as `provisioner_name` with `services`: the objectbucket.io controller unless
/// `--cosi-only`, and the COSI driver when `--cosi-endpoint` is set (named `default_driver`
/// unless `--cosi-driver-name` says otherwise).
pub async fn run<P: Provisioner>(
    backend: P,
    provisioner_name: &str,
    args: &ControllerArgs,
    cosi: &CosiArgs,
    default_driver: &str,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    mut services: Vec<Service>,
) -> Result<(), CosiRunError> {
    let backend = Arc::new(backend);
    services.extend(cosi.service(backend.clone(), default_driver)?);
    if cosi.cosi_only {
        serve_only(provisioner_name, args, shutdown, services).await?;
    } else {
        bucket_provisioner::runtime::run(backend, provisioner_name, args, shutdown, services)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        cosi: CosiArgs,
    }

    #[test]
    fn cosi_is_off_unless_an_endpoint_is_given_and_alone_only_with_one() {
        let off = Flags::try_parse_from(["x"]).unwrap().cosi;
        assert!(off.cosi_endpoint.is_none() && !off.cosi_only);
        assert!(Flags::try_parse_from(["x", "--cosi-only"]).is_err());
        let on = Flags::try_parse_from([
            "x",
            "--cosi-endpoint",
            "unix:///run/cosi/cosi.sock",
            "--cosi-only",
            "--cosi-driver-name",
            "my.driver",
        ])
        .unwrap()
        .cosi;
        assert!(on.cosi_only);
        assert_eq!(on.cosi_driver_name.as_deref(), Some("my.driver"));
    }

    #[tokio::test]
    async fn a_wrong_endpoint_or_name_stops_the_binary_before_it_serves() {
        let backend = Arc::new(NoBackend);
        let dir = tempfile::tempdir().unwrap();
        let good = format!("unix://{}/cosi.sock", dir.path().display());
        let args = |endpoint: &str, name: Option<&str>| CosiArgs {
            cosi_endpoint: Some(endpoint.to_owned()),
            cosi_driver_name: name.map(str::to_owned),
            cosi_only: false,
            cosi_parameters: Vec::new(),
        };
        let err = args("/not/a/url.sock", None).service(backend.clone(), "d.io").err().unwrap();
        assert!(err.to_string().contains("unix://"), "{err}");
        let err = args(&good, Some("-bad")).service(backend.clone(), "d.io").err().unwrap();
        assert!(err.to_string().contains("--cosi-driver-name"), "{err}");
        assert!(args(&good, None).service(backend.clone(), "d.io").unwrap().is_some());
        assert!(CosiArgs::default().service(backend, "d.io").unwrap().is_none());
    }

    /// A backend that serves objectbucket.io claims only; no call reaches it here.
    struct NoBackend;

    impl Provisioner for NoBackend {
        async fn provision(
            &self,
            _: &bucket_provisioner::BucketOptions,
        ) -> Result<bucket_provisioner::ProvisionedBucket, bucket_provisioner::BackendError>
        {
            unreachable!()
        }

        async fn grant(
            &self,
            _: &bucket_provisioner::BucketOptions,
        ) -> Result<bucket_provisioner::ProvisionedBucket, bucket_provisioner::BackendError>
        {
            unreachable!()
        }

        async fn delete(
            &self,
            _: &bucket_api::ObjectBucket,
        ) -> Result<bucket_provisioner::Removed, bucket_provisioner::BackendError> {
            unreachable!()
        }

        async fn revoke(
            &self,
            _: &bucket_api::ObjectBucket,
        ) -> Result<(), bucket_provisioner::BackendError> {
            unreachable!()
        }
    }
}
