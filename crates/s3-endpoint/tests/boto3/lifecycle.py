"""Lifecycle rules through boto3: none at first, set and read back as sent, a transition
refused with its code leaving the rules unchanged, removed."""

import datetime

from s3client import check, client, done, env, refusal

s3 = client("OWNER")
bucket = env("S3_BUCKET")

code = refusal(s3.get_bucket_lifecycle_configuration, Bucket=bucket)
check(code == ("NoSuchLifecycleConfiguration", 404), f"no rules at first: {code}")
rules = [
    {
        "ID": "tmp",
        "Status": "Enabled",
        "Filter": {"Prefix": "tmp/"},
        "Expiration": {"Days": 1},
    },
    {
        "ID": "logs",
        "Status": "Disabled",
        "Filter": {
            "And": {
                "Prefix": "logs/",
                "Tags": [{"Key": "class", "Value": "scratch"}, {"Key": "team", "Value": "a"}],
            }
        },
        "Expiration": {"Days": 30},
    },
    {
        "ID": "dated",
        "Status": "Enabled",
        "Filter": {"Tag": {"Key": "class", "Value": "scratch"}},
        "Expiration": {"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)},
    },
    {
        "ID": "sized",
        "Status": "Enabled",
        "Filter": {
            "And": {
                "Prefix": "big/",
                "ObjectSizeGreaterThan": 1048576,
                "ObjectSizeLessThan": 1073741824,
            }
        },
        "Expiration": {"Days": 3},
    },
    {
        "ID": "markers",
        "Status": "Enabled",
        "Filter": {"Prefix": "old/"},
        "Expiration": {"ExpiredObjectDeleteMarker": True},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 5, "NewerNoncurrentVersions": 2},
    },
    {
        "ID": "uploads",
        "Status": "Enabled",
        "Filter": {},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
    },
]
s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
check(got == rules, f"rules read as sent: {got}")

transition = {
    "ID": "cold",
    "Status": "Enabled",
    "Filter": {"Prefix": ""},
    "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}],
}
code = refusal(
    s3.put_bucket_lifecycle_configuration,
    Bucket=bucket,
    LifecycleConfiguration={"Rules": [transition]},
)
check(code == ("NotImplemented", 501), f"a transition refused: {code}")
got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
check(got == rules, "the refused rules left the old ones in place")
code = refusal(
    s3.put_bucket_lifecycle_configuration,
    Bucket=bucket,
    LifecycleConfiguration={"Rules": [dict(rules[0], Expiration={"Days": 0})]},
)
check(code == ("InvalidArgument", 400), f"an expiry after 0 days refused: {code}")

code = refusal(
    s3.put_bucket_lifecycle_configuration,
    Bucket=bucket,
    LifecycleConfiguration={
        "Rules": [dict(rules[4], Filter={"Tag": {"Key": "class", "Value": "scratch"}})]
    },
)
check(code == ("InvalidRequest", 400), f"a marker expiry filtered by tag refused: {code}")

s3.delete_bucket_lifecycle(Bucket=bucket)
code = refusal(s3.get_bucket_lifecycle_configuration, Bucket=bucket)
check(code == ("NoSuchLifecycleConfiguration", 404), f"rules removed: {code}")
# Left for the Rust test to find through the AWS SDK.
s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules[:1]})
done("lifecycle")
