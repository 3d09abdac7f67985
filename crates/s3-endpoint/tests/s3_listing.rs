//! Paginated listings against a sorted model of the keys: every page size, delimiter, prefix,
//! marker and continuation token must together list each key or common prefix exactly once,
//! in order, as S3 does.

mod common;

use aws_sdk_s3::Client;
use aws_sdk_s3::types::EncodingType;
use common::Server;
use futures::StreamExt;

/// One listing entry: a key, or a common prefix (`true`).
type Entry = (String, bool);

/// What S3 lists for `keys` (sorted) under `prefix`, rolled up at `delimiter`, after `after`.
fn model(keys: &[String], prefix: &str, delimiter: Option<&str>, after: &str) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    for key in keys.iter().filter(|k| k.starts_with(prefix)) {
        let rolled = delimiter.and_then(|d| {
            let at = key[prefix.len()..].find(d)?;
            Some(key[..prefix.len() + at + d.len()].to_owned())
        });
        let entry = match rolled {
            Some(common) => (common, true),
            None => (key.clone(), false),
        };
        if entry.0.as_str() <= after || entries.last() == Some(&entry) {
            continue;
        }
        entries.push(entry);
    }
    entries
}

/// The API and pagination style a client lists with.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// ListObjects, resuming at `NextMarker` (or the last key when absent).
    V1,
    /// ListObjects with `encoding-type=url`, as botocore sends it.
    V1Url,
    /// ListObjectsV2 with continuation tokens.
    V2,
    /// ListObjectsV2 resuming by `StartAfter` the last entry, as some clients do.
    V2StartAfter,
    /// ListObjectVersions, resuming at `NextKeyMarker` and `NextVersionIdMarker`.
    Versions,
    /// ListMultipartUploads (one upload per key), resuming at `NextKeyMarker` and
    /// `NextUploadIdMarker`.
    Uploads,
}

/// Every page of a listing in `style`, each checked against the model, and all entries.
async fn list_all(
    s3: &Client,
    bucket: &str,
    keys: &[String],
    prefix: &str,
    delimiter: Option<&str>,
    page_size: Option<i32>,
    style: Style,
) -> Vec<Entry> {
    let context = format!("{style:?} prefix {prefix:?} delimiter {delimiter:?} size {page_size:?}");
    let mut all: Vec<Entry> = Vec::new();
    let mut resume: Option<String> = None;
    let mut resume_id: Option<String> = None;
    for _ in 0..10_000 {
        let (mut entries, truncated, next) = match style {
            Style::V1 | Style::V1Url => {
                let url = matches!(style, Style::V1Url);
                let out = s3
                    .list_objects()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_delimiter(delimiter.map(str::to_owned))
                    .set_marker(resume.clone())
                    .set_max_keys(page_size)
                    .set_encoding_type(url.then_some(EncodingType::Url))
                    .send()
                    .await
                    .unwrap();
                let decoded = |t: &str| {
                    percent_encoding::percent_decode_str(t).decode_utf8_lossy().into_owned()
                };
                let text = |t: &str| if url { decoded(t) } else { t.to_owned() };
                let mut entries: Vec<Entry> =
                    out.contents().iter().map(|o| (text(o.key().unwrap()), false)).collect();
                entries.extend(
                    out.common_prefixes().iter().map(|p| (text(p.prefix().unwrap()), true)),
                );
                let next = out.next_marker().map(text);
                (entries, out.is_truncated().unwrap_or(false), next)
            }
            Style::Versions => {
                let out = s3
                    .list_object_versions()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_delimiter(delimiter.map(str::to_owned))
                    .set_key_marker(resume.clone())
                    .set_version_id_marker(resume.as_ref().map(|_| "null".to_owned()))
                    .set_max_keys(page_size)
                    .send()
                    .await
                    .unwrap();
                let mut entries: Vec<Entry> =
                    out.versions().iter().map(|v| (v.key().unwrap().to_owned(), false)).collect();
                entries.extend(
                    out.common_prefixes().iter().map(|p| (p.prefix().unwrap().to_owned(), true)),
                );
                let next = out.next_key_marker().map(str::to_owned);
                (entries, out.is_truncated().unwrap_or(false), next)
            }
            Style::Uploads => {
                let out = s3
                    .list_multipart_uploads()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_delimiter(delimiter.map(str::to_owned))
                    .set_key_marker(resume.clone())
                    .set_upload_id_marker(resume_id.clone())
                    .set_max_uploads(page_size)
                    .send()
                    .await
                    .unwrap();
                let mut entries: Vec<Entry> =
                    out.uploads().iter().map(|u| (u.key().unwrap().to_owned(), false)).collect();
                entries.extend(
                    out.common_prefixes().iter().map(|p| (p.prefix().unwrap().to_owned(), true)),
                );
                resume_id = out.next_upload_id_marker().map(str::to_owned);
                let next = out.next_key_marker().map(str::to_owned);
                (entries, out.is_truncated().unwrap_or(false), next)
            }
            Style::V2 | Style::V2StartAfter => {
                let by_token = matches!(style, Style::V2);
                let out = s3
                    .list_objects_v2()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_delimiter(delimiter.map(str::to_owned))
                    .set_continuation_token(resume.clone().filter(|_| by_token))
                    .set_start_after(resume.clone().filter(|_| !by_token))
                    .set_max_keys(page_size)
                    .send()
                    .await
                    .unwrap();
                let mut entries: Vec<Entry> =
                    out.contents().iter().map(|o| (o.key().unwrap().to_owned(), false)).collect();
                entries.extend(
                    out.common_prefixes().iter().map(|p| (p.prefix().unwrap().to_owned(), true)),
                );
                let next = out.next_continuation_token().map(str::to_owned);
                (entries, out.is_truncated().unwrap_or(false), next)
            }
        };
        entries.sort();
        let after = all.last().map(|e| e.0.clone()).unwrap_or_default();
        let expected = model(keys, prefix, delimiter, &after);
        let size = usize::try_from(page_size.unwrap_or(1000).min(1000)).unwrap();
        assert_eq!(entries, expected[..size.min(expected.len())], "{context} after {after:?}");
        assert_eq!(truncated, expected.len() > size, "{context} after {after:?}");
        all.extend(entries);
        if !truncated {
            return all;
        }
        resume = match style {
            Style::V1 | Style::V1Url => Some(next.unwrap_or_else(|| all.last().unwrap().0.clone())),
            Style::Versions | Style::Uploads => {
                Some(next.expect("a key marker on a truncated page"))
            }
            Style::V2 => Some(next.expect("a continuation token on a truncated page")),
            Style::V2StartAfter => Some(all.last().unwrap().0.clone()),
        };
    }
    panic!("{context}: the listing never ended");
}

async fn put_all(s3: &Client, bucket: &str, keys: &[String]) {
    let mut puts = futures::stream::iter(keys.iter().map(|key| {
        let body = if key.ends_with('/') { Vec::new() } else { key.as_bytes().to_vec() };
        s3.put_object().bucket(bucket).key(key).body(body.into()).send()
    }))
    .buffer_unordered(16);
    while let Some(put) = puts.next().await {
        put.unwrap();
    }
}

#[tokio::test]
async fn a_prefix_of_a_thousand_keys_and_its_neighbours_list_completely() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("many", "obc-l").await;
    let s3 = server.client(&key);
    let mut keys: Vec<String> = (1000..2000).map(|i| format!("0/{i}")).collect();
    keys.extend(["1999", "1999#", "1999+", "2000"].map(str::to_owned));
    keys.extend(["0/1999#", "0/1999+", "0/2000", "0/1999/x", "0#", "0+"].map(str::to_owned));
    put_all(&s3, "many", &keys).await;
    keys.sort();

    for style in [Style::V1, Style::V1Url, Style::V2, Style::V2StartAfter, Style::Versions] {
        for prefix in ["", "0/", "1"] {
            for delimiter in [None, Some("/"), Some("9")] {
                for size in [None, Some(999)] {
                    let all = list_all(&s3, "many", &keys, prefix, delimiter, size, style).await;
                    assert_eq!(all, model(&keys, prefix, delimiter, ""), "{style:?} {prefix:?}");
                }
            }
        }
    }
}

/// Keys drawn from a few characters that sort around `/` (`#`, `+`, `-`, `.` before it, `0`,
/// `9`, `a` after), so that keys are also prefixes of others, hold empty or dot segments and
/// land on both sides of every delimiter.
fn random_keys(seed: u64, count: usize) -> Vec<String> {
    const ALPHABET: &[u8] = b"ab09/#+-.";
    let noise = common::pattern(seed, count * 8);
    let mut keys: Vec<String> = noise
        .chunks(8)
        .map(|chunk| {
            let len = 1 + usize::from(chunk[0]) % 6;
            chunk[1..=len.min(7)]
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                .collect()
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[tokio::test]
async fn random_keys_list_as_the_model_for_every_page_size_delimiter_and_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("random", "obc-r").await;
    let s3 = server.client(&key);
    for seed in [1, 2] {
        let keys = random_keys(seed, 60);
        put_all(&s3, "random", &keys).await;
        let everything = list_all(&s3, "random", &keys, "", None, None, Style::V2).await;
        assert_eq!(everything.len(), keys.len(), "every key is stored and listed");
        let mut prefixes = vec![String::new(), "a".to_owned(), "a/".to_owned(), "0#".to_owned()];
        prefixes.extend(keys.iter().step_by(29).map(|k| k[..k.len().min(2)].to_owned()));
        for prefix in &prefixes {
            for delimiter in [None, Some("/"), Some("#"), Some("a"), Some("//"), Some("9/")] {
                for size in [Some(1), Some(2), Some(5), None] {
                    for style in
                        [Style::V1, Style::V1Url, Style::V2, Style::V2StartAfter, Style::Versions]
                    {
                        let all =
                            list_all(&s3, "random", &keys, prefix, delimiter, size, style).await;
                        assert_eq!(
                            all,
                            model(&keys, prefix, delimiter, ""),
                            "{style:?} {prefix:?}"
                        );
                    }
                }
            }
        }

        // Multipart uploads page the same way: one in progress for each key.
        let mut starts = futures::stream::iter(
            keys.iter().map(|k| s3.create_multipart_upload().bucket("random").key(k).send()),
        )
        .buffer_unordered(16);
        while let Some(started) = starts.next().await {
            started.unwrap();
        }
        for prefix in &prefixes {
            for delimiter in [None, Some("/"), Some("#"), Some("a")] {
                for size in [Some(1), Some(2), Some(5), None] {
                    let all =
                        list_all(&s3, "random", &keys, prefix, delimiter, size, Style::Uploads)
                            .await;
                    assert_eq!(all, model(&keys, prefix, delimiter, ""), "uploads {prefix:?}");
                }
            }
        }
        let uploads = s3.list_multipart_uploads().bucket("random").send().await.unwrap();
        for upload in uploads.uploads() {
            let (key, id) = (upload.key().unwrap(), upload.upload_id().unwrap());
            s3.abort_multipart_upload()
                .bucket("random")
                .key(key)
                .upload_id(id)
                .send()
                .await
                .unwrap();
        }

        let mut deletes = futures::stream::iter(
            keys.iter().map(|k| s3.delete_object().bucket("random").key(k).send()),
        )
        .buffer_unordered(16);
        while let Some(deleted) = deletes.next().await {
            deleted.unwrap();
        }
        for delimiter in [None, Some("/"), Some("#")] {
            let left = s3
                .list_objects_v2()
                .bucket("random")
                .set_delimiter(delimiter.map(str::to_owned))
                .send()
                .await
                .unwrap();
            assert_eq!(left.key_count(), Some(0), "{delimiter:?}: {left:?}");
        }
    }
}
