"""Versioning through boto3: the bucket's state, versions listed by a paginator over several
pages, reads and removals by VersionId, delete markers, and the null version of a suspended
bucket."""

import botocore.exceptions

from s3client import check, client, done, env, refusal

s3 = client("OWNER")
bucket = env("S3_BUCKET")

check("Status" not in s3.get_bucket_versioning(Bucket=bucket), "never versioned at first")
s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
check(s3.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled", "versioning enabled")

made = {}
for key, count in [("a", 3), ("b", 2), ("c", 1)]:
    for n in range(count):
        out = s3.put_object(Bucket=bucket, Key=key, Body=f"{key}{n}".encode())
        made.setdefault(key, []).append(out["VersionId"])
ids = [v for vs in made.values() for v in vs]
check(len(set(ids)) == 6 and "null" not in ids, "each PUT made a version of its own")
marker = s3.delete_object(Bucket=bucket, Key="b")
check(marker.get("DeleteMarker") is True and marker.get("VersionId"), "a delete makes a marker")
marker = marker["VersionId"]

pages = list(
    s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 2}
    )
)
check(len(pages) >= 4, f"listed over several pages: {len(pages)}")
check(all(p["IsTruncated"] for p in pages[:-1]) and not pages[-1]["IsTruncated"], "IsTruncated")
versions = [(v["Key"], v["VersionId"], v["IsLatest"]) for p in pages for v in p.get("Versions", [])]
markers = [(m["Key"], m["VersionId"], m["IsLatest"]) for p in pages for m in p.get("DeleteMarkers", [])]
check(sorted(v[1] for v in versions) == sorted(ids), "every version listed once")
check(markers == [("b", marker, True)], "the marker listed, latest")
latest = sorted((k, v) for k, v, is_latest in versions if is_latest)
check(latest == [("a", made["a"][-1]), ("c", made["c"][0])], "the latest of a and c")
for key in made:
    listed = [v for k, v, _ in versions if k == key]
    check(listed == list(reversed(made[key])), f"versions of {key} newest first")

body = s3.get_object(Bucket=bucket, Key="a", VersionId=made["a"][0])["Body"].read()
check(body == b"a0", "an old version read by its id")
check(s3.get_object(Bucket=bucket, Key="a")["Body"].read() == b"a2", "the latest read plain")
out = s3.delete_object(Bucket=bucket, Key="a", VersionId=made["a"][2])
check(out.get("VersionId") == made["a"][2], "a version removed by its id")
check(s3.get_object(Bucket=bucket, Key="a")["Body"].read() == b"a1", "the one before is latest")
code = refusal(s3.get_object, Bucket=bucket, Key="a", VersionId=made["a"][2])
check(code[1] == 404, f"the removed version is gone: {code}")

out = s3.get_object(Bucket=bucket, Key="a", VersionId=made["a"][0])
check(out.get("VersionId") == made["a"][0], "GetObject by id names the version")
out = s3.copy_object(
    Bucket=bucket, Key="a-copy", CopySource={"Bucket": bucket, "Key": "a", "VersionId": made["a"][0]}
)
check(out.get("CopySourceVersionId") == made["a"][0], "CopyObject names the version copied")
check(out.get("VersionId") not in (None, "null"), "and the version it made")
check(s3.get_object(Bucket=bucket, Key="a-copy")["Body"].read() == b"a0", "the old bytes copied")
s3.delete_object(Bucket=bucket, Key="a-copy", VersionId=out["VersionId"])
s3.put_object_tagging(
    Bucket=bucket,
    Key="a",
    VersionId=made["a"][0],
    Tagging={"TagSet": [{"Key": "old", "Value": "yes"}]},
)
got = s3.get_object_tagging(Bucket=bucket, Key="a", VersionId=made["a"][0])
check(got["TagSet"] == [{"Key": "old", "Value": "yes"}], "tags of an old version")
check(got.get("VersionId") == made["a"][0], "GetObjectTagging names the version")
check(s3.get_object_tagging(Bucket=bucket, Key="a")["TagSet"] == [], "the latest keeps none")
s3.put_object(Bucket=bucket, Key="dir/x", Body=b"x")
listed = s3.list_object_versions(Bucket=bucket, Delimiter="/")
prefixes = [p["Prefix"] for p in listed.get("CommonPrefixes", [])]
check(prefixes == ["dir/"], f"Delimiter rolls keys up: {prefixes}")
check(all("/" not in v["Key"] for v in listed.get("Versions", [])), "and lists none of them")
s3.delete_object(Bucket=bucket, Key="dir/x")
listed = s3.list_object_versions(Bucket=bucket, Prefix="dir/")
for entry in listed.get("Versions", []) + listed.get("DeleteMarkers", []):
    s3.delete_object(Bucket=bucket, Key=entry["Key"], VersionId=entry["VersionId"])

# boto3 asks for url-encoded keys in listings and decodes them: the names must come back whole.
odd = "odd dir/ü+plus%20&amp;<x>.txt"
odd_version = s3.put_object(Bucket=bucket, Key=odd, Body=b"odd")["VersionId"]
listed = s3.list_object_versions(Bucket=bucket, Prefix="odd dir/", Delimiter="/")
check([v["Key"] for v in listed["Versions"]] == [odd], f"an odd key listed whole: {listed}")
listed = s3.list_object_versions(Bucket=bucket, Prefix="odd", Delimiter="/")
prefixes = [p["Prefix"] for p in listed.get("CommonPrefixes", [])]
check(prefixes == ["odd dir/"], f"its prefix rolled up whole: {prefixes}")
pages = s3.get_paginator("list_object_versions").paginate(
    Bucket=bucket, Prefix="odd", PaginationConfig={"PageSize": 1}
)
check([v["Key"] for p in pages for v in p.get("Versions", [])] == [odd], "paged past it")
s3.delete_object(Bucket=bucket, Key=odd, VersionId=odd_version)

code = refusal(s3.get_object, Bucket=bucket, Key="b")
check(code == ("NoSuchKey", 404), f"a key behind a marker reads as missing: {code}")
try:
    s3.head_object(Bucket=bucket, Key="b")
    raise AssertionError("HeadObject of a key behind a marker was answered")
except botocore.exceptions.ClientError as err:
    headers = err.response["ResponseMetadata"]["HTTPHeaders"]
    check(err.response["ResponseMetadata"]["HTTPStatusCode"] == 404, "HEAD behind a marker: 404")
    check(headers.get("x-amz-delete-marker") == "true", "x-amz-delete-marker on the 404")
    check(headers.get("x-amz-version-id") == marker, "x-amz-version-id names the marker")
code = refusal(s3.get_object, Bucket=bucket, Key="b", VersionId=marker)
check(code == ("MethodNotAllowed", 405), f"the marker asked for by id: {code}")
out = s3.delete_object(Bucket=bucket, Key="b", VersionId=marker)
check(out.get("DeleteMarker") is True and out.get("VersionId") == marker, "the marker removed")
check(s3.get_object(Bucket=bucket, Key="b")["Body"].read() == b"b1", "b is back")

out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "c"}, {"Key": "gone"}]})
answered = sorted((d["Key"], d.get("DeleteMarker"), "DeleteMarkerVersionId" in d) for d in out["Deleted"])
check(answered == [("c", True, True), ("gone", True, True)], f"DeleteObjects made markers: {out}")
check(s3.get_object(Bucket=bucket, Key="c", VersionId=made["c"][0])["Body"].read() == b"c0", "c kept")

s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
check(s3.get_bucket_versioning(Bucket=bucket).get("Status") == "Suspended", "suspended")
for body in [b"n1", b"n2"]:
    out = s3.put_object(Bucket=bucket, Key="n", Body=body)
    check(out.get("VersionId", "null") == "null", "a PUT while suspended writes the null version")
listed = s3.list_object_versions(Bucket=bucket, Prefix="n")
check([v["VersionId"] for v in listed.get("Versions", [])] == ["null"], "one null version")
check(s3.get_object(Bucket=bucket, Key="n", VersionId="null")["Body"].read() == b"n2", "overwrote")
out = s3.delete_object(Bucket=bucket, Key="n")
check(out.get("DeleteMarker") is True and out.get("VersionId") == "null", "a null marker")
listed = s3.list_object_versions(Bucket=bucket, Prefix="n")
check("Versions" not in listed, "the null version replaced by the marker")
check([m["VersionId"] for m in listed["DeleteMarkers"]] == ["null"], "the null marker listed")
code = refusal(s3.get_object, Bucket=bucket, Key="n", VersionId="null")
check(code == ("MethodNotAllowed", 405), f"the null marker asked for by id: {code}")
out = s3.delete_object(Bucket=bucket, Key="n", VersionId="null")
check(out.get("DeleteMarker") is True, "the null marker removed by its id")
check("DeleteMarkers" not in s3.list_object_versions(Bucket=bucket, Prefix="n"), "none left")
out = s3.put_object(Bucket=bucket, Key="a", Body=b"a-null")
check(out.get("VersionId", "null") == "null", "a null version over versioned ones")
listed = s3.list_object_versions(Bucket=bucket, Prefix="a")["Versions"]
check([v["VersionId"] for v in listed] == ["null", made["a"][1], made["a"][0]], "kept behind")
done("versioning")
