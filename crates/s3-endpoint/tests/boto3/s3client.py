"""What every boto3 script shares: clients for the endpoint the Rust test started, built from
the environment it passes, and checks that print what they checked."""

import os

import boto3
import botocore
import botocore.exceptions
from botocore.config import Config

print(f"client: boto3 {boto3.__version__}, botocore {botocore.__version__}", flush=True)


def env(name):
    """The value of `name`, which the Rust test must have set."""
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set: run this script through its Rust test")
    return value


def client(who):
    """A SigV4, path-style client signing with the key `who` (OWNER, OTHER or ADMIN)."""
    config = Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        retries={"max_attempts": 1, "mode": "standard"},
    )
    return boto3.client(
        "s3",
        endpoint_url=env("S3_ENDPOINT"),
        aws_access_key_id=env(f"{who}_KEY_ID"),
        aws_secret_access_key=env(f"{who}_SECRET"),
        region_name="us-east-1",
        config=config,
    )


def check(condition, what):
    """Fails with `what` unless `condition`; prints it when it holds."""
    if not condition:
        raise AssertionError(f"failed: {what}")
    print(f"checked: {what}", flush=True)


def refusal(call, **kwargs):
    """The (error code, HTTP status) with which `call(**kwargs)` is refused."""
    try:
        call(**kwargs)
    except botocore.exceptions.ClientError as err:
        return err.response["Error"]["Code"], err.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError(f"{call.__name__} {kwargs} was accepted")


def done(name):
    """The line the Rust test looks for: every check of the script held."""
    print(f"all checks passed: {name}", flush=True)
