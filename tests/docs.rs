//! The book under `docs/` (`make docs` renders it) and the README:
//!
//! - nothing the single-page README documented is lost: every heading it had, frozen in
//!   `docs/moved-from-readme.txt`, is a heading of the chapter named there;
//! - `SUMMARY.md` lists every chapter and every chapter it lists exists;
//! - every link of the book and the README resolves, to a file and to a heading's anchor as
//!   mdBook makes it; the book's links stay inside the book (a link to a file of the repository
//!   leads nowhere in the rendered book);
//! - every ```` ```yaml ```` block is accepted by the real apiserver (server-side dry run), the
//!   COSI ones by a control plane serving their COSI version. A block that shows only part of an
//!   object (a claim's `spec.additionalConfig`, a class's `parameters`) is completed to one
//!   first: a missing `kind` is an ObjectBucketClaim, and the `apiVersion`, name, claim's
//!   `storageClassName` and class's `provisioner` are filled in. A block that cannot be applied
//!   says so with `yaml,norun` and an HTML comment just above it giving the reason. A block may
//!   `{{#include}}` a file (mdBook's include), which is then what is applied;
//! - every ```` ```sh runnable ```` block runs: bash, from the repository's root, against a
//!   control plane of its own with kubectl and helm on the PATH.

#[path = "docs/markdown.rs"]
mod markdown;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::{Value, json};
use test_support::cosi::{CosiVersion, install_cosi_crds};
use test_support::{Apply, ControlPlane, apply_objects, client_with_crds};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

fn book() -> PathBuf {
    repo().join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `.md` file under `dir`, sorted.
fn markdown_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
    into.sort();
}

/// The book's pages (`SUMMARY.md` included) and the README.
fn pages() -> Vec<PathBuf> {
    let mut files = Vec::new();
    markdown_files(&book(), &mut files);
    assert!(files.len() > 20, "the book's pages were found: {files:?}");
    files.push(repo().join("README.md"));
    files
}

/// `path` with `.` and `..` folded away, without touching the file system.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn shown(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap_or(path).display().to_string()
}

#[test]
fn every_heading_of_the_old_readme_is_in_the_book() {
    let list = read(&repo().join("docs/moved-from-readme.txt"));
    let mut checked = 0;
    let mut missing = Vec::new();
    for line in list.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [_, heading, chapter] = fields[..] else {
            panic!("docs/moved-from-readme.txt: not `file<TAB>heading<TAB>chapter`: {line:?}");
        };
        let heading = heading.trim_start_matches('#').trim();
        let path = book().join(chapter);
        let found = path.is_file() && markdown::headings(&read(&path)).iter().any(|h| h == heading);
        if !found {
            missing.push(format!("{heading:?} is no heading of docs/src/{chapter}"));
        }
        checked += 1;
    }
    assert!(checked >= 50, "the list holds the old headings ({checked})");
    assert!(missing.is_empty(), "headings the book lost (or moved elsewhere): {missing:#?}");
}

#[test]
fn the_summary_lists_every_chapter_and_only_chapters_that_exist() {
    let summary = read(&book().join("SUMMARY.md"));
    let listed: BTreeSet<PathBuf> = markdown::links(&summary)
        .into_iter()
        .map(|(_, target)| normal(&book().join(target)))
        .collect();
    let mut files = Vec::new();
    markdown_files(&book(), &mut files);
    let files: BTreeSet<PathBuf> =
        files.into_iter().filter(|f| !f.ends_with("SUMMARY.md")).collect();
    let unlisted: Vec<String> = files.difference(&listed).map(|f| shown(f)).collect();
    let absent: Vec<String> = listed.difference(&files).map(|f| shown(f)).collect();
    assert!(unlisted.is_empty(), "chapters SUMMARY.md does not list: {unlisted:?}");
    assert!(absent.is_empty(), "SUMMARY.md lists files that do not exist: {absent:?}");
}

#[test]
fn every_link_of_the_book_and_the_readme_resolves() {
    let root = repo();
    let mut anchors: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let in_book = page.starts_with(book());
        for (line, target) in markdown::links(&text) {
            if ["http://", "https://", "mailto:"].iter().any(|s| target.starts_with(s)) {
                continue;
            }
            checked += 1;
            let at = format!("{}:{line}: {target}", shown(&page));
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if file.is_empty() {
                page.clone()
            } else {
                normal(&page.parent().unwrap().join(file))
            };
            if in_book && !file.starts_with(book()) {
                broken.push(format!("{at}: leaves the book (name the file in `code` instead)"));
                continue;
            }
            if !file.starts_with(&root) || !file.exists() {
                broken.push(format!("{at}: no such file"));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            let known = anchors
                .entry(file.clone())
                .or_insert_with(|| markdown::anchors(&std::fs::read_to_string(&file).unwrap()));
            if !known.contains(anchor) {
                broken.push(format!("{at}: no heading of {} has this anchor", shown(&file)));
            }
        }
    }
    assert!(checked >= 50, "the links were found ({checked})");
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// One YAML example: the page and line it comes from, and its objects.
struct Example {
    at: String,
    objects: Vec<Value>,
}

/// `text` with each line `{{#include FILE}}` replaced by that file (relative to `page`), as
/// mdBook renders it.
fn with_includes(page: &Path, text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        match line.trim().strip_prefix("{{#include ").and_then(|l| l.strip_suffix("}}")) {
            Some(file) => out.push_str(&read(&normal(&page.parent().unwrap().join(file.trim())))),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Every `yaml` block of the book and the README that is to be applied; a `norun` one must give
/// its reason in an HTML comment just above it.
fn yaml_examples() -> Vec<Example> {
    let mut examples = Vec::new();
    let mut unexplained = Vec::new();
    for page in pages() {
        for block in markdown::blocks(&read(&page)).into_iter().filter(|b| b.is("yaml")) {
            let at = format!("{}:{}", shown(&page), block.line);
            if block.has("norun") {
                if !(block.above.starts_with("<!--") && block.above.contains("norun:")) {
                    unexplained.push(at);
                }
                continue;
            }
            let text = with_includes(&page, &block.text);
            let objects = serde_yaml::Deserializer::from_str(&text)
                .map(|document| {
                    Value::deserialize(document).unwrap_or_else(|e| panic!("{at}: {e}"))
                })
                .filter(|value| !value.is_null())
                .collect();
            examples.push(Example { at, objects });
        }
    }
    assert!(
        unexplained.is_empty(),
        "`yaml,norun` blocks without a `<!-- norun: why -->` line above them: {unexplained:?}"
    );
    examples
}

/// `object` completed to a whole object when it shows only part of one (see the module's
/// documentation); `n` makes the names it gives unique.
fn completed(mut object: Value, at: &str, n: usize) -> Value {
    let map = object.as_object_mut().unwrap_or_else(|| panic!("{at}: not an object"));
    if !map.contains_key("kind") {
        map.insert("kind".into(), json!("ObjectBucketClaim"));
    }
    let kind = map["kind"].as_str().unwrap_or_default().to_owned();
    if !map.contains_key("apiVersion") {
        let version = match kind.as_str() {
            "ObjectBucketClaim" => "objectbucket.io/v1alpha1",
            "StorageClass" => "storage.k8s.io/v1",
            other => panic!("{at}: a {other} without apiVersion; give it one, or mark it norun"),
        };
        map.insert("apiVersion".into(), json!(version));
    }
    let metadata = map.entry("metadata").or_insert_with(|| json!({}));
    if metadata.get("name").is_none() {
        metadata["name"] = json!(format!("docs-example-{n}"));
    }
    match kind.as_str() {
        "ObjectBucketClaim" => {
            let spec = map.entry("spec").or_insert_with(|| json!({}));
            if spec.get("storageClassName").is_none() {
                spec["storageClassName"] = json!("docs-example");
            }
        }
        "StorageClass" if !map.contains_key("provisioner") => {
            map.insert("provisioner".into(), json!("example.com/docs-example"));
        }
        _ => {}
    }
    object
}

fn is_cosi(object: &Value) -> Option<CosiVersion> {
    let version = object["apiVersion"].as_str()?.strip_prefix("objectstorage.k8s.io/")?;
    CosiVersion::ALL.into_iter().find(|v| v.version() == version)
}

/// The objects of `examples`, completed, each with where it comes from, and the namespaces
/// they name (made first: a dry run in a missing namespace is refused).
fn to_apply(examples: &[&Example]) -> Vec<(PathBuf, DynamicObject)> {
    let mut namespaces = BTreeSet::new();
    let mut objects = Vec::new();
    for example in examples {
        for object in &example.objects {
            let object = completed(object.clone(), &example.at, objects.len());
            if let Some(namespace) = object["metadata"]["namespace"].as_str() {
                namespaces.insert(namespace.to_owned());
            }
            let object: DynamicObject = serde_json::from_value(object)
                .unwrap_or_else(|e| panic!("{}: not a Kubernetes object: {e}", example.at));
            objects.push((PathBuf::from(&example.at), object));
        }
    }
    let made = namespaces.into_iter().map(|name| {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        (PathBuf::from("(namespace)"), serde_json::from_value(namespace).unwrap())
    });
    made.chain(objects).collect()
}

#[tokio::test]
async fn every_yaml_example_is_accepted_by_the_apiserver() {
    let examples = yaml_examples();
    let plain: Vec<&Example> =
        examples.iter().filter(|e| !e.objects.iter().any(|o| is_cosi(o).is_some())).collect();
    let objects = to_apply(&plain);
    assert!(objects.len() >= 20, "the examples were found ({})", objects.len());
    let client = client_with_crds().await;
    apply_objects(&client, &objects, Apply::DryRun).await.unwrap_or_else(|e| panic!("{e:#}"));
}

/// The COSI examples, each on a control plane of its own with its COSI version's CRDs (both
/// versions define the same CRD names, so one plane holds one).
#[tokio::test]
async fn every_cosi_yaml_example_is_accepted_by_its_cosi_version() {
    let examples = yaml_examples();
    for version in CosiVersion::ALL {
        let of_version: Vec<&Example> = examples
            .iter()
            .filter(|e| e.objects.iter().any(|o| is_cosi(o) == Some(version)))
            .collect();
        assert!(!of_version.is_empty(), "the book has {} examples", version.version());
        let objects = to_apply(&of_version);
        let plane = ControlPlane::start().expect("a control plane");
        let client = plane.client().await;
        let crds = version.dir().expect("tests/cosi/build.sh").join("crd");
        install_cosi_crds(&client, &crds).await.expect("the COSI CRDs");
        apply_objects(&client, &objects, Apply::DryRun).await.unwrap_or_else(|e| panic!("{e:#}"));
    }
}

/// The README's first claim and pod are those of `examples/manifests/` (which `kubectl apply -f
/// examples/manifests/` applies and the node's tests run), so the two cannot drift apart.
#[test]
fn the_readme_shows_the_example_manifests() {
    let shown: Vec<Value> = yaml_examples()
        .into_iter()
        .filter(|e| e.at.starts_with("README.md:"))
        .flat_map(|e| e.objects)
        .collect();
    let files: Vec<PathBuf> = ["00-namespace.yaml", "10-claim.yaml", "20-consumer.yaml"]
        .iter()
        .map(|f| repo().join("examples/manifests").join(f))
        .collect();
    let examples: Vec<Value> = test_support::read_manifest_files(&files)
        .unwrap()
        .into_iter()
        .map(|(_, object)| serde_json::to_value(object).unwrap())
        .collect();
    let shown: Vec<Value> = shown
        .into_iter()
        .map(|o| serde_json::to_value(serde_json::from_value::<DynamicObject>(o).unwrap()).unwrap())
        .collect();
    assert_eq!(shown, examples, "README.md and examples/manifests/ differ");
}

/// Every shell block marked `runnable` (```` ```sh runnable ````), run by bash (`-euo pipefail`)
/// from the repository's root against a control plane of its own, as its administrator, with
/// kubectl and helm (built into the cache at the control plane's version) first on the PATH and a
/// home of its own. A block is runnable when what it needs exists in a bare cluster; the others
/// (a node's files, a registry's images) stay plain `sh`.
#[test]
fn every_runnable_shell_example_runs() {
    use test_support::tools::tool_from_script;
    let kubectl = tool_from_script("BUCKET_PROVISIONER_KUBECTL_BIN", "tests/kubectl/build.sh");
    let helm = tool_from_script("BUCKET_PROVISIONER_HELM_BIN", "tests/helm/build.sh");
    let tools = [&kubectl, &helm].map(|t| t.parent().unwrap().display().to_string()).join(":");
    let path = format!("{tools}:{}", std::env::var("PATH").unwrap_or_default());
    let mut ran = Vec::new();
    for page in pages() {
        let runnable = markdown::blocks(&read(&page));
        for block in runnable.into_iter().filter(|b| b.is("sh") && b.has("runnable")) {
            let at = format!("{}:{}", shown(&page), block.line);
            let plane = ControlPlane::start().expect("a control plane");
            let home = tempfile::tempdir().unwrap();
            let output = std::process::Command::new("bash")
                .args(["-euo", "pipefail", "-c", &block.text])
                .current_dir(repo())
                .env("PATH", &path)
                .env("KUBECONFIG", plane.kubeconfig_path())
                .env("HOME", home.path())
                .output()
                .unwrap_or_else(|e| panic!("{at}: bash: {e}"));
            assert!(
                output.status.success(),
                "{at} failed ({}):\n{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                output.status,
                block.text,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            ran.push(at);
        }
    }
    assert!(ran.len() >= 3, "the runnable examples were found: {ran:?}");
}
