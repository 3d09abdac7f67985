"""Object lock through boto3: a bucket created with it by the operator, its configuration,
retention and legal holds, compliance refusing every removal, governance giving way only to
the owner's key asking to bypass, DeleteObjects answering each protected version alone."""

import datetime

from s3client import check, client, done, env, refusal

admin, owner, other = client("ADMIN"), client("OWNER"), client("OTHER")
bucket = env("S3_BUCKET")

admin.create_bucket(Bucket="operator-plain")
code = refusal(admin.get_object_lock_configuration, Bucket="operator-plain")
check(code == ("ObjectLockConfigurationNotFoundError", 404), f"none without lock: {code}")
admin.create_bucket(Bucket="operator-locked", ObjectLockEnabledForBucket=True)
got = admin.get_object_lock_configuration(Bucket="operator-locked")["ObjectLockConfiguration"]
check(got == {"ObjectLockEnabled": "Enabled"}, f"created with object lock: {got}")
status = admin.get_bucket_versioning(Bucket="operator-locked").get("Status")
check(status == "Enabled", "a lock bucket is versioned")
code = refusal(
    admin.put_bucket_versioning,
    Bucket="operator-locked",
    VersioningConfiguration={"Status": "Suspended"},
)
check(code == ("InvalidBucketState", 409), f"and cannot be suspended: {code}")
config = {
    "ObjectLockEnabled": "Enabled",
    "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
}
admin.put_object_lock_configuration(Bucket="operator-locked", ObjectLockConfiguration=config)
got = admin.get_object_lock_configuration(Bucket="operator-locked")["ObjectLockConfiguration"]
check(got == config, "the default retention read as sent")
admin.put_object(Bucket="operator-locked", Key="defaulted", Body=b"data")
head = admin.head_object(Bucket="operator-locked", Key="defaulted")
check(head.get("ObjectLockMode") == "GOVERNANCE", "a new object gets the default retention")

now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
until = now + datetime.timedelta(days=2)


def put(key, mode):
    out = owner.put_object(
        Bucket=bucket, Key=key, Body=b"data", ObjectLockMode=mode, ObjectLockRetainUntilDate=until
    )
    return out["VersionId"]


compliance = put("comp", "COMPLIANCE")
got = owner.get_object_retention(Bucket=bucket, Key="comp", VersionId=compliance)["Retention"]
check(got == {"Mode": "COMPLIANCE", "RetainUntilDate": until}, f"retention read back: {got}")
head = owner.head_object(Bucket=bucket, Key="comp", VersionId=compliance)
check(head.get("ObjectLockRetainUntilDate") == until, "HeadObject names the date")
for name, s3 in [("owner", owner), ("other", other), ("operator", admin)]:
    for bypass in [False, True]:
        code = refusal(
            s3.delete_object,
            Bucket=bucket,
            Key="comp",
            VersionId=compliance,
            BypassGovernanceRetention=bypass,
        )
        check(code == ("AccessDenied", 403), f"compliance kept from the {name} ({bypass}): {code}")
later = until + datetime.timedelta(days=1)
other.put_object_retention(
    Bucket=bucket,
    Key="comp",
    VersionId=compliance,
    Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later},
)
got = owner.get_object_retention(Bucket=bucket, Key="comp", VersionId=compliance)["Retention"]
check(got["RetainUntilDate"] == later, "any writing key may lengthen a retention")
until = later
code = refusal(
    owner.put_object_retention,
    Bucket=bucket,
    Key="comp",
    VersionId=compliance,
    Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until},
)
check(code == ("AccessDenied", 403), f"compliance cannot be weakened: {code}")

governance = put("gov", "GOVERNANCE")
code = refusal(owner.delete_object, Bucket=bucket, Key="gov", VersionId=governance)
check(code == ("AccessDenied", 403), f"governance kept without a bypass: {code}")
code = refusal(
    other.delete_object,
    Bucket=bucket,
    Key="gov",
    VersionId=governance,
    BypassGovernanceRetention=True,
)
check(code == ("AccessDenied", 403), f"another claim's key may not bypass: {code}")
owner.delete_object(
    Bucket=bucket, Key="gov", VersionId=governance, BypassGovernanceRetention=True
)
code = refusal(owner.head_object, Bucket=bucket, Key="gov", VersionId=governance)
check(code[1] == 404, f"the owner's key bypassed governance: {code}")

held = owner.put_object(Bucket=bucket, Key="held", Body=b"data")["VersionId"]
code = refusal(owner.get_object_retention, Bucket=bucket, Key="held", VersionId=held)
check(code == ("NoSuchObjectLockConfiguration", 404), f"no retention on a plain version: {code}")
code = refusal(owner.get_object_legal_hold, Bucket=bucket, Key="held", VersionId=held)
check(code == ("NoSuchObjectLockConfiguration", 404), f"no legal hold on a plain version: {code}")
owner.put_object_legal_hold(
    Bucket=bucket, Key="held", VersionId=held, LegalHold={"Status": "ON"}
)
got = owner.get_object_legal_hold(Bucket=bucket, Key="held", VersionId=held)["LegalHold"]
check(got == {"Status": "ON"}, "legal hold on")
head = owner.head_object(Bucket=bucket, Key="held", VersionId=held)
check(head.get("ObjectLockLegalHoldStatus") == "ON", "HeadObject shows the hold")

upload = owner.create_multipart_upload(
    Bucket=bucket,
    Key="parts",
    ObjectLockMode="GOVERNANCE",
    ObjectLockRetainUntilDate=until,
    ObjectLockLegalHoldStatus="ON",
)
part = owner.upload_part(
    Bucket=bucket, Key="parts", UploadId=upload["UploadId"], PartNumber=1, Body=b"p" * 1024
)
done_upload = owner.complete_multipart_upload(
    Bucket=bucket,
    Key="parts",
    UploadId=upload["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
)
head = owner.head_object(Bucket=bucket, Key="parts", VersionId=done_upload["VersionId"])
check(
    (head.get("ObjectLockMode"), head.get("ObjectLockLegalHoldStatus")) == ("GOVERNANCE", "ON"),
    "an upload in parts gets the lock it asked for",
)
copied = owner.copy_object(
    Bucket=bucket,
    Key="copied",
    CopySource={"Bucket": bucket, "Key": "comp", "VersionId": compliance},
    ObjectLockMode="GOVERNANCE",
    ObjectLockRetainUntilDate=until,
)
head = owner.head_object(Bucket=bucket, Key="copied", VersionId=copied["VersionId"])
check(head.get("ObjectLockMode") == "GOVERNANCE", "a copy gets the lock its request names")
code = refusal(
    owner.delete_object,
    Bucket=bucket,
    Key="held",
    VersionId=held,
    BypassGovernanceRetention=True,
)
check(code == ("AccessDenied", 403), f"a legal hold refuses removal: {code}")
free = owner.put_object(Bucket=bucket, Key="free", Body=b"data")["VersionId"]

out = owner.delete_objects(
    Bucket=bucket,
    Delete={
        "Objects": [
            {"Key": "comp", "VersionId": compliance},
            {"Key": "held", "VersionId": held},
            {"Key": "free", "VersionId": free},
        ]
    },
)
errors = sorted((e["Key"], e.get("VersionId"), e["Code"]) for e in out.get("Errors", []))
check(
    errors == [("comp", compliance, "AccessDenied"), ("held", held, "AccessDenied")],
    f"DeleteObjects refuses each protected version: {errors}",
)
deleted = [(d["Key"], d["VersionId"]) for d in out.get("Deleted", [])]
check(deleted == [("free", free)], f"and removes the free one: {deleted}")

owner.put_object_legal_hold(
    Bucket=bucket, Key="held", VersionId=held, LegalHold={"Status": "OFF"}
)
owner.delete_object(Bucket=bucket, Key="held", VersionId=held)
code = refusal(owner.head_object, Bucket=bucket, Key="held", VersionId=held)
check(code[1] == 404, f"removed once the hold was cleared: {code}")
done("object_lock")
