//! ListObjectVersions: S3's order, markers, prefixes, delimiters and pagination by key and
//! version id, through the SDK and as raw signed HTTP.

use aws_sdk_s3::types::BucketVersioningStatus;

use super::common::{Server, raw_request, sign_v4};
use super::{all_versions, entries, put, set_versioning};

#[tokio::test]
async fn pages_of_any_size_list_every_version_and_marker_once_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("pages", "obc-1").await;
    let s3 = server.client(&key);
    put(&s3, "pages", "a", b"legacy").await;
    set_versioning(&s3, "pages", BucketVersioningStatus::Enabled).await;
    for round in 0..3 {
        for name in ["a", "b/x", "b/y", "c"] {
            put(&s3, "pages", name, format!("{name}{round}").as_bytes()).await;
        }
    }
    s3.delete_object().bucket("pages").key("c").send().await.unwrap();
    s3.delete_object().bucket("pages").key("b/x").send().await.unwrap();
    let all = all_versions(&s3, "pages").await;
    // a: 3 + null; b/x: marker + 3; b/y: 3; c: marker + 3.
    assert_eq!(all.len(), 15, "{all:#?}");
    let latest: Vec<_> = all.iter().filter(|v| v.2).map(|v| (v.0.as_str(), v.3)).collect();
    assert_eq!(latest, [("a", false), ("b/x", true), ("b/y", false), ("c", true)]);
    assert_eq!(all[3], ("a".to_owned(), "null".to_owned(), false, false), "the oldest of a");

    for size in 1..=6 {
        let (mut seen, mut key_marker, mut id_marker) = (Vec::new(), None, None);
        loop {
            let page = s3
                .list_object_versions()
                .bucket("pages")
                .max_keys(size)
                .set_key_marker(key_marker.clone())
                .set_version_id_marker(id_marker.clone())
                .send()
                .await
                .unwrap();
            let got = entries(&page);
            assert!(got.len() <= size as usize);
            seen.extend(got);
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            id_marker = page.next_version_id_marker().map(str::to_owned);
            assert!(key_marker.is_some());
        }
        super::sort_entries(&mut seen);
        assert_eq!(seen, all, "pages of {size}: each entry once");
    }

    // Prefix and delimiter.
    let rolled = s3.list_object_versions().bucket("pages").delimiter("/").send().await.unwrap();
    let prefixes: Vec<_> = rolled.common_prefixes().iter().map(|p| p.prefix().unwrap()).collect();
    assert_eq!(prefixes, ["b/"]);
    let keys: Vec<_> = entries(&rolled).into_iter().map(|v| v.0).collect();
    assert_eq!(keys.iter().filter(|k| k.starts_with('b')).count(), 0);
    let under = s3.list_object_versions().bucket("pages").prefix("b/").send().await.unwrap();
    let under = entries(&under);
    assert_eq!(under.len(), 7, "{under:#?}");
    assert!(under.iter().all(|v| v.0.starts_with("b/")));
}

#[tokio::test]
async fn raw_signed_requests_see_the_versions_xml_and_headers() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("raw", "obc-1").await;
    let s3 = server.client(&key);
    set_versioning(&s3, "raw", BucketVersioningStatus::Enabled).await;
    let one = put(&s3, "raw", "doc", b"first").await.unwrap();
    put(&s3, "raw", "doc", b"second").await.unwrap();
    let marker = s3.delete_object().bucket("raw").key("doc").send().await.unwrap();
    let marker = marker.version_id().unwrap().to_owned();

    let unsigned = "UNSIGNED-PAYLOAD";
    let send = |method: &'static str, path: String| {
        let key = key.clone();
        let addr = server.addr;
        async move {
            let headers = [("x-amz-content-sha256", unsigned)];
            let signed = sign_v4(addr, &key, method, &path, &headers, unsigned);
            let mut all: Vec<(&str, &str)> = headers.to_vec();
            all.extend(signed.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            raw_request(addr, method, &path, &all, b"").await
        }
    };
    let listed = send("GET", "/raw?versions".to_owned()).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let xml = listed.text();
    assert!(xml.contains("<ListVersionsResult"), "{xml}");
    assert_eq!(xml.matches("<Version>").count(), 2, "{xml}");
    assert_eq!(xml.matches("<DeleteMarker>").count(), 1, "{xml}");
    assert!(
        xml.contains(&format!("<VersionId>{marker}</VersionId><IsLatest>true</IsLatest>"))
            || xml.contains(&format!("<VersionId>{marker}</VersionId>")),
        "{xml}"
    );
    let got = send("GET", format!("/raw/doc?versionId={one}")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, b"first");
    assert_eq!(got.header("x-amz-version-id"), Some(one.as_str()));
    let gone = send("GET", "/raw/doc".to_owned()).await;
    assert_eq!(gone.status, 404);
    assert_eq!(gone.error_code().as_deref(), Some("NoSuchKey"));
    assert_eq!(gone.header("x-amz-delete-marker"), Some("true"));
    let state = send("GET", "/raw?versioning".to_owned()).await;
    assert!(state.text().contains("<Status>Enabled</Status>"), "{}", state.text());
}
