//! How the binary's two halves are put together: the S3 endpoint that tenants talk to and the
//! controller that holds the Kubernetes credential, in one process or two.
//!
//! - [`endpoint_alone`]: the endpoint as a process of its own (`--serve-store`), with no
//!   Kubernetes client.
//! - [`controller_half`]: the controller reaching that endpoint's store over its socket
//!   (`--store-socket`), answering its token reviews.
//! - [`one_process`]: both in one process, the endpoint a service beside the controller.

pub mod controller_half;
pub mod endpoint_alone;
pub mod one_process;
