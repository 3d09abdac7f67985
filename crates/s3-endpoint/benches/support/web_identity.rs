//! What short-lived credentials cost on the endpoint: `AssumeRoleWithWebIdentity` answered per
//! second, and small GETs signed with a session key beside the same GETs signed with the
//! claim's own key (goal: within 5%). Tokens are vouched for at once by [`Vouch`], so that the
//! figures are the endpoint's own, without the apiserver's `TokenReview`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use s3_endpoint::BucketStore;
use s3_endpoint::store::WebIdentityAccess;
use s3_endpoint::sts::{IdentityVerifier, Unverified, VerifiedIdentity};

use super::median;

/// The one subject every bench token stands for.
pub const SUBJECT: &str = "system:serviceaccount:bench:app";
const ASSUMES: usize = 300;
const ROUNDS: usize = 7;
const ROUND_GETS: usize = 300;
const SMALL: usize = 4 << 10;

/// Vouches for every token as [`SUBJECT`], valid for an hour.
pub struct Vouch;

#[async_trait::async_trait]
impl IdentityVerifier for Vouch {
    async fn verify(&self, _token: &str) -> Result<VerifiedIdentity, Unverified> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        Ok(VerifiedIdentity {
            subject: SUBJECT.into(),
            audience: "bench".into(),
            expires_unix: now + 3600,
            uid: None,
        })
    }
}

fn sts(port: u16) -> aws_sdk_sts::Client {
    let config = aws_sdk_sts::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(aws_sdk_sts::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .build();
    aws_sdk_sts::Client::from_conf(config)
}

/// Measures on `bucket` of `user` (whose static key `static_client` signs with), on the
/// endpoint at `port` serving `store` with [`Vouch`].
pub async fn measure(
    store: &Arc<BucketStore>,
    port: u16,
    (bucket, user): (&str, &str),
    static_client: &Client,
    out: &mut String,
) {
    let access = WebIdentityAccess { subjects: vec![SUBJECT.into()], ..Default::default() };
    store.set_web_identity(user, bucket, Some(access)).await.unwrap();
    let sts = sts(port);
    let role = format!("arn:aws:iam::000000000000:role/{user}");
    let assume = || {
        sts.assume_role_with_web_identity()
            .role_arn(&role)
            .role_session_name("bench")
            .web_identity_token("token")
            .send()
    };
    let started = Instant::now();
    let mut last = None;
    for _ in 0..ASSUMES {
        last = Some(assume().await.unwrap());
    }
    let rate = ASSUMES as f64 / started.elapsed().as_secs_f64();
    writeln!(out, "AssumeRoleWithWebIdentity (token vouched at once): {rate:8.0} sessions/s")
        .unwrap();

    let c = last.unwrap().credentials.unwrap();
    let credentials = Credentials::new(
        c.access_key_id,
        c.secret_access_key,
        Some(c.session_token),
        None,
        "bench",
    );
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    let session_client = Client::from_conf(config);
    let body = ByteStream::from(vec![5u8; SMALL]);
    static_client.put_object().bucket(bucket).key("sts/get").body(body).send().await.unwrap();
    let mut rates: [Vec<f64>; 2] = Default::default();
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let s3 = if which == 0 { static_client } else { &session_client };
            let started = Instant::now();
            for _ in 0..ROUND_GETS {
                let got = s3.get_object().bucket(bucket).key("sts/get").send().await.unwrap();
                assert_eq!(got.body.collect().await.unwrap().into_bytes().len(), SMALL);
            }
            rates[which].push(ROUND_GETS as f64 / started.elapsed().as_secs_f64());
        }
    }
    let (own, session) = (median(rates[0].clone()), median(rates[1].clone()));
    writeln!(
        out,
        "GET 4 KiB, the claim's own key: {own:8.0} ops/s  a session key: {session:8.0} ops/s  \
         ({:+.1}%)",
        (session / own - 1.0) * 100.0
    )
    .unwrap();
}
