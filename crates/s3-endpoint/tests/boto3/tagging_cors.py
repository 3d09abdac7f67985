"""Object tagging and bucket CORS through boto3: tags set on PUT, replaced, read, removed and
carried or replaced by a copy; CORS rules set, read and removed, and a browser's preflight
answered per them."""

import urllib.error
import urllib.request

from s3client import check, client, done, env, refusal

s3 = client("OWNER")
bucket = env("S3_BUCKET")


def tags(key):
    got = s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    return sorted((t["Key"], t["Value"]) for t in got)


s3.put_object(Bucket=bucket, Key="tagged", Body=b"data", Tagging="team=a&env=dev%20box")
check(tags("tagged") == [("env", "dev box"), ("team", "a")], "tags sent with PutObject")
check(s3.get_object(Bucket=bucket, Key="tagged")["TagCount"] == 2, "GetObject counts the tags")
s3.put_object_tagging(
    Bucket=bucket,
    Key="tagged",
    Tagging={"TagSet": [{"Key": "class", "Value": "hot"}, {"Key": "team", "Value": "b"}]},
)
check(tags("tagged") == [("class", "hot"), ("team", "b")], "PutObjectTagging replaces the set")

s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "tagged"})
check(tags("copied") == [("class", "hot"), ("team", "b")], "a copy carries the tags")
s3.copy_object(
    Bucket=bucket,
    Key="retagged",
    CopySource={"Bucket": bucket, "Key": "tagged"},
    TaggingDirective="REPLACE",
    Tagging="only=this",
)
check(tags("retagged") == [("only", "this")], "a copy with REPLACE takes the new tags")

upload = s3.create_multipart_upload(Bucket=bucket, Key="parts", Tagging="from=upload")
part = s3.upload_part(
    Bucket=bucket, Key="parts", UploadId=upload["UploadId"], PartNumber=1, Body=b"p" * 1024
)
s3.complete_multipart_upload(
    Bucket=bucket,
    Key="parts",
    UploadId=upload["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
)
check(tags("parts") == [("from", "upload")], "tags named when an upload in parts began")
check(s3.head_object(Bucket=bucket, Key="parts")["ContentLength"] == 1024, "its bytes")

s3.delete_object_tagging(Bucket=bucket, Key="tagged")
check(tags("tagged") == [], "DeleteObjectTagging leaves none")
code = refusal(s3.get_object_tagging, Bucket=bucket, Key="missing")
check(code == ("NoSuchKey", 404), f"tags of a missing key refused: {code}")
code = refusal(
    s3.put_object_tagging,
    Bucket=bucket,
    Key="tagged",
    Tagging={"TagSet": [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}]},
)
check(code == ("InvalidTag", 400), f"a repeated tag key refused: {code}")

APP = "https://app.example.com"
code = refusal(s3.get_bucket_cors, Bucket=bucket)
check(code == ("NoSuchCORSConfiguration", 404), f"no CORS rules at first: {code}")
rules = [
    {
        "ID": "uploads",
        "AllowedOrigins": [APP],
        "AllowedMethods": ["PUT", "POST"],
        "AllowedHeaders": ["content-type", "x-amz-*"],
        "ExposeHeaders": ["ETag"],
        "MaxAgeSeconds": 3000,
    },
    {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]},
]
s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})
check(s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == rules, "CORS rules read as sent")


def preflight(origin, method, headers):
    """A browser's OPTIONS, unsigned: (status, headers with lower-case names)."""
    request = urllib.request.Request(
        f"{env('S3_ENDPOINT')}/{bucket}/upload.txt",
        method="OPTIONS",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": headers,
        },
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}


status, headers = preflight(APP, "PUT", "Content-Type, X-Amz-Date")
check(status == 200, f"a preflight the rules allow answered 200: {status}")
check(headers.get("access-control-allow-origin") == APP, "Access-Control-Allow-Origin")
check(headers.get("access-control-allow-methods") == "PUT, POST", "Access-Control-Allow-Methods")
check(
    headers.get("access-control-allow-headers") == "content-type, x-amz-date",
    f"Access-Control-Allow-Headers: {headers.get('access-control-allow-headers')}",
)
check(headers.get("access-control-expose-headers") == "ETag", "Access-Control-Expose-Headers")
check(headers.get("access-control-max-age") == "3000", "Access-Control-Max-Age")
status, headers = preflight("https://evil.example.org", "PUT", "content-type")
check(status == 403, f"a preflight no rule allows answered 403: {status}")
check("access-control-allow-origin" not in headers, "and without Access-Control-Allow-Origin")



def with_origin(request, **_):
    request.headers["Origin"] = APP


# The actual request after a preflight: botocore sends it, signed, with the page's origin.
s3.meta.events.register("before-sign.s3.PutObject", with_origin)
out = s3.put_object(Bucket=bucket, Key="upload.txt", Body=b"from the page", ContentType="text/plain")
s3.meta.events.unregister("before-sign.s3.PutObject", with_origin)
headers = out["ResponseMetadata"]["HTTPHeaders"]
check(headers.get("access-control-allow-origin") == APP, "a PUT from the origin gets Allow-Origin")
check(headers.get("access-control-expose-headers") == "ETag", "and the headers it may read")
out = s3.put_object(Bucket=bucket, Key="plain.txt", Body=b"no origin")
check("access-control-allow-origin" not in out["ResponseMetadata"]["HTTPHeaders"], "none without")

s3.delete_bucket_cors(Bucket=bucket)
code = refusal(s3.get_bucket_cors, Bucket=bucket)
check(code == ("NoSuchCORSConfiguration", 404), f"CORS rules removed: {code}")
status, _ = preflight(APP, "PUT", "content-type")
check(status == 403, f"a preflight with no rules answered 403: {status}")
# Left for the Rust test to find through the AWS SDK.
s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules[1:]})
done("tagging_cors")
