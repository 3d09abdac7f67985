//! The tree's own rules, read from the source: no source file over 800 lines (tests included),
//! no circle of imports between the files of any crate, and a README that stays a landing page
//! (the documentation is the book under `docs/`, checked by `tests/docs.rs`). Crates cannot import each other in a
//! circle (Cargo refuses); inside a crate only this test holds the line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use test_support::source_files::rust_files;

const LONGEST_FILE: usize = 800;
/// The README's most bytes: about a tenth of what it held before the book took its text in.
const LONGEST_README: usize = 16_000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

/// The module path of a file under `src`: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` and
/// `main.rs` are the crate root (empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> =
        relative.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The paths a file names after `crate::` or `super::`, each as its segments resolved from the
/// crate root; `{a::b, c}` groups are expanded one level, which is all a module edge needs.
fn referenced_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let parent = module[..module.len().saturating_sub(1)].to_vec();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().last();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut tails = Vec::new();
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                tails.extend(group[..end].split(',').map(str::trim).map(str::to_owned));
            } else {
                tails.push(rest.to_owned());
            }
            for tail in tails {
                let mut path = base.clone();
                for segment in tail.split("::") {
                    let ident: String =
                        segment.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if ident.is_empty() {
                        break;
                    }
                    let whole = ident.len() == segment.len();
                    path.push(ident);
                    if !whole {
                        break;
                    }
                }
                found.push(path);
            }
        }
    }
    found
}

/// Every circle of the graph, as the files in one strongly connected component (Tarjan).
fn circles(edges: &BTreeMap<usize, BTreeSet<usize>>, nodes: usize) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges.get(&v).into_iter().flatten() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..nodes {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.found
}

/// The files of one `src` tree that import each other in a circle. The crate root and `mod.rs`
/// files are left out as targets: they declare and re-export, and every file names items
/// through them.
fn import_circles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let by_module: BTreeMap<&[String], usize> = modules
        .iter()
        .enumerate()
        .filter(|(i, m)| !m.is_empty() && !files[*i].ends_with("mod.rs"))
        .map(|(i, m)| (m.as_slice(), i))
        .collect();
    let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (i, file) in files.iter().enumerate() {
        let text = std::fs::read_to_string(file).expect("readable source");
        // A file's own tests may reach anywhere; what the module itself imports is the rule.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(&text);
        // Comments (doc links among them) name modules without importing them.
        let code: String = code
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for path in referenced_paths(&code, &modules[i]) {
            let target = (1..=path.len()).rev().find_map(|n| by_module.get(&path[..n]).copied());
            if let Some(target) = target.filter(|t| *t != i) {
                edges.entry(i).or_default().insert(target);
            }
        }
    }
    circles(&edges, files.len())
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> =
                c.into_iter().map(|i| files[i].display().to_string()).collect();
            names.sort();
            names
        })
        .collect()
}

fn source_trees() -> Vec<PathBuf> {
    let root = workspace();
    let mut trees: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    trees.sort();
    trees
}

#[test]
fn no_file_of_the_workspace_is_longer_than_800_lines() {
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["crates", "tests", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "the walk found the sources ({} files)", files.len());
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > LONGEST_FILE).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {LONGEST_FILE} lines: {long:#?}");
}

#[test]
fn the_readme_stays_a_landing_page() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README.md");
    assert!(
        readme.len() <= LONGEST_README,
        "README.md is {} bytes (at most {LONGEST_README}): detail belongs in the book, docs/src/",
        readme.len()
    );
}

#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let trees = source_trees();
    assert!(trees.len() >= 8, "every crate's src/ was found: {trees:?}");
    let found: Vec<Vec<String>> = trees.iter().flat_map(|src| import_circles(src)).collect();
    assert!(found.is_empty(), "files importing each other in a circle: {found:#?}");
}

#[test]
fn the_circle_finder_finds_a_circle_and_resolves_groups_and_super() {
    let dir = std::env::temp_dir().join(format!("layout-test-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("store")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod store;\npub use a::Thing;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{store::parts::P, Thing};\n").unwrap();
    std::fs::write(src.join("store/mod.rs"), "mod parts;\nmod meta;\n").unwrap();
    std::fs::write(src.join("store/parts.rs"), "use super::meta::M;\n").unwrap();
    std::fs::write(src.join("store/meta.rs"), "fn f() { crate::a::g(); }\n").unwrap();
    let found = import_circles(&src);
    std::fs::write(src.join("store/meta.rs"), "fn f() {}\n").unwrap();
    let after = import_circles(&src);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3, "a → store::parts → store::meta → a: {found:?}");
    assert!(after.is_empty(), "{after:?}");
}
