"""A pod's application with nothing but the claim's ConfigMap in its environment and its
projected ServiceAccount token on disk: boto3 finds the role, the token and the STS endpoint by
itself (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ENDPOINT_URL_STS), trades the token for a
session, then writes, reads and lists the bucket. Prints one line per step; exits non-zero with
the error code on the first failure."""

import os
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

for stray in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
    if stray in os.environ:
        sys.exit(f"{stray} is set: the consumer must hold no key")

bucket = os.environ["BUCKET_NAME"]
s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
try:
    s3.put_object(Bucket=bucket, Key="from-boto3", Body=b"keyless")
    print("wrote")
    body = s3.get_object(Bucket=bucket, Key="from-boto3")["Body"].read()
    assert body == b"keyless", body
    print("read")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert "from-boto3" in keys, keys
    print("listed")
    identity = s3._request_signer._credentials.get_frozen_credentials()
    assert identity.access_key.startswith("ASIA"), identity.access_key
    assert identity.token, "a session has a token"
    print("session", identity.access_key)
except ClientError as e:
    sys.exit(f"{e.response['Error']['Code']}: {e.response['Error'].get('Message')}")
