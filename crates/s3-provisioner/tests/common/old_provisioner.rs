//! The Go aws-s3-provisioner (lib-bucket-provisioner's AWS example), run for real against moto
//! through a TLS-terminating proxy: it has no endpoint setting, but honours `HTTPS_PROXY` and
//! `SSL_CERT_FILE`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use test_support::{ControlPlane, Supervised, TlsProxy};

/// Environment variable naming the built binary (set by `make test`).
pub const BIN_ENV: &str = "BUCKET_PROVISIONER_AWS_S3_PROVISIONER_BIN";

/// The provisioner name it registers (a constant of its source).
pub const NAME: &str = "aws-s3.io/bucket";

/// The binary: from `make`, or built by the project's script (which needs its source, named by
/// `BUCKET_PROVISIONER_AWS_S3_PROVISIONER_SOURCE`).
fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os(BIN_ENV).map(PathBuf::from).filter(|b| b.is_file()) {
        return bin;
    }
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/aws-s3-provisioner/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(output.status.success(), "{} failed; see its output above", script.display());
    let stdout = String::from_utf8(output.stdout).expect("build.sh prints a path");
    PathBuf::from(stdout.lines().last().expect("build.sh printed the binary").trim())
}

/// The old provisioner, running; dropping it kills it.
pub struct OldProvisioner {
    process: Supervised,
}

impl OldProvisioner {
    /// Starts it with the control plane's administrator kubeconfig (it is not what this
    /// project deploys), reaching moto through `proxy`.
    pub fn start(proxy: &TlsProxy) -> OldProvisioner {
        let dir = tempfile::Builder::new().prefix("aws-s3-provisioner-").tempdir().unwrap().keep();
        let kubeconfig = ControlPlane::shared().kubeconfig_path().display().to_string();
        let argv = [
            binary().display().to_string(),
            format!("-kubeconfig={kubeconfig}"),
            "-logtostderr".into(),
            "-v=2".into(),
        ];
        let ca = proxy.ca.display().to_string();
        // aws-sdk-go reads AWS_CA_BUNDLE as its roots; SSL_CERT_FILE serves Go itself.
        let env = [
            ("HTTPS_PROXY", proxy.url.as_str()),
            ("SSL_CERT_FILE", ca.as_str()),
            ("AWS_CA_BUNDLE", ca.as_str()),
        ];
        let process = Supervised::start(&dir, &[("old", argv.to_vec())], &env)
            .expect("starting the old provisioner");
        OldProvisioner { process }
    }

    /// Kills it, as an operator scaling its Deployment to zero would end it.
    pub fn stop(&mut self) {
        self.process.stop("old").expect("stopping the old provisioner");
    }

    /// Starts it again after [`OldProvisioner::stop`], as a rollback would.
    pub fn start_again(&mut self) {
        self.process.start_again("old").expect("starting the old provisioner again");
    }

    /// How many lines of its log so far contain `text`.
    pub fn logged(&self, text: &str) -> usize {
        let log = std::fs::read_to_string(self.process.log("old")).unwrap_or_default();
        log.lines().filter(|line| line.contains(text)).count()
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        self.process.log_tail("old", 60)
    }
}
