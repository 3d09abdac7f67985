//! The loop that asks, every few seconds, whether the backends claims wait on answer again (see
//! [`crate::kubernetes::waiting`]): through [`Provisioner::probe`], or, for a backend that
//! cannot tell, by retrying one waiting claim.

use std::sync::Arc;
use std::time::Instant;

use crate::Provisioner;
use crate::bucket::context::Context;
use crate::bucket::remote::backend_parameters;
use crate::kubernetes::unwind::caught;

/// Probes, once per probe interval, the backend of every StorageClass whose waiting claims all
/// wait long. Never ends.
pub(crate) async fn probe_backends<P: Provisioner>(ctx: Arc<Context<P>>) {
    loop {
        tokio::time::sleep(ctx.waiting.interval).await;
        for class in ctx.waiting.to_probe(Instant::now()) {
            let parameters = ctx
                .caches
                .class(&class)
                .map(|c| backend_parameters(c.parameters.clone().unwrap_or_default()));
            let answer = match &parameters {
                // A backend's panic ends this probe, never the loop (nor the process).
                Some(parameters) => {
                    caught(ctx.provisioner.probe(parameters)).await.unwrap_or_else(|panic| {
                        tracing::warn!(
                            class,
                            panic,
                            "the backend's probe panicked; retrying a claim"
                        );
                        None
                    })
                }
                None => None,
            };
            match answer {
                None => ctx.waiting.retry_soonest(&class, Instant::now()),
                Some(Ok(())) => {
                    let woken = ctx.waiting.backend_up(&class);
                    if woken > 0 {
                        tracing::info!(
                            class,
                            woken,
                            "the backend answers again; retrying the claims that waited on it"
                        );
                    }
                }
                Some(Err(error)) => {
                    if !ctx.waiting.backend_down(&class) {
                        continue;
                    }
                    tracing::info!(class, %error, "the backend does not answer; the claims \
                        waiting on it are retried as soon as it does");
                }
            }
        }
    }
}
