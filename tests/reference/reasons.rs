//! The reasons the code gives a claim's or volume's condition, its Events and the backends'
//! refusals, found by reading the source: there is no single table of them. A reason is a
//! CamelCase string literal (`Bound`, `ShareWithdrawn`) in one of these places of a crate's non-test
//! code:
//!
//! - the first string argument of a call to `event`, `publish`, `release` (or `Release`),
//!   `set_status`, `refused`, `permanent` or `transient` (Events, ObjectBucket phases, backend
//!   refusals), or the string right after an `EventType::` or `ObjectBucketPhase::` value;
//! - after `reason:` or in a `let reason =` statement;
//! - in the body of a function whose name holds `reason` (the error-to-reason tables);
//! - a `pub const` of the library crates (`bucket-provisioner`, `provisioner-runtime`), where the
//!   reasons backends share are named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use test_support::source_files::rust_files;

/// The crates whose reasons reach a claim, a volume or an Event.
/// (The COSI driver answers gRPC status codes, no reasons.)
const CRATES: [&str; 7] = [
    "bucket-provisioner",
    "provisioner-runtime",
    "volume-provisioner",
    "hostpath-provisioner",
    "s3-provisioner",
    "garage-provisioner",
    "hostpath-volume-provisioner",
];
/// Where the reasons backends share are named as constants.
const CONSTANT_CRATES: [&str; 2] = ["bucket-provisioner", "provisioner-runtime"];
const CALLS: [&str; 8] =
    ["event", "publish", "release", "Release", "set_status", "refused", "permanent", "transient"];

/// A file's code without its test module and comment lines, whitespace collapsed to single
/// spaces.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable source");
    let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
    let lines = text.lines().filter(|l| !l.trim_start().starts_with("//"));
    lines.flat_map(str::split_whitespace).collect::<Vec<_>>().join(" ")
}

fn is_reason_like(literal: &str) -> bool {
    let mut chars = literal.chars();
    let humps = literal.chars().filter(char::is_ascii_uppercase).count();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && literal.chars().all(|c| c.is_ascii_alphanumeric())
        && literal.chars().any(|c| c.is_ascii_lowercase())
        && humps >= 1
        && literal.len() >= 4
}

/// The string literals of `code` with their byte offsets (escapes skipped, raw strings not
/// expected where reasons are).
fn literals(code: &str) -> Vec<(usize, &str)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'\'' && bytes.get(at + 2) == Some(&b'\'') {
            at += 3; // a char literal such as '"'
            continue;
        }
        if bytes[at] != b'"' {
            at += 1;
            continue;
        }
        let start = at + 1;
        let mut end = start;
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        found.push((at, &code[start..end.min(bytes.len())]));
        at = end + 1;
    }
    found
}

/// Whether `before` ends in `pub const NAME: &str = `.
fn names_a_constant(before: &str) -> bool {
    let Some(at) = before.rfind("pub const ") else { return false };
    let rest = &before[at + "pub const ".len()..];
    rest.strip_suffix(": &str = ")
        .is_some_and(|name| name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// The name of the call whose parentheses hold offset `at`, if `at`'s literal is its first
/// string argument.
fn enclosing_call(code: &str, at: usize) -> Option<&str> {
    let before = &code[..at];
    let mut depth = 0;
    for (i, c) in before.char_indices().rev() {
        match c {
            ')' | ']' | '}' => depth += 1,
            '(' | '[' | '{' if depth > 0 => depth -= 1,
            '(' if depth == 0 => {
                if before[i..].contains('"') {
                    return None;
                }
                let name = before[..i].rsplit(|c: char| !(c.is_alphanumeric() || c == '_'));
                return name.into_iter().next();
            }
            '[' | '{' | ';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The byte ranges of `let reason = ...;` statements.
fn reason_lets(code: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("let reason =") {
        let start = from + at;
        let mut depth = 0i32;
        let mut end = code.len();
        for (i, c) in code[start..].char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ';' if depth == 0 => {
                    end = start + i;
                    break;
                }
                _ => {}
            }
        }
        ranges.push((start, end));
        from = end.max(start + 1);
    }
    ranges
}

/// The byte ranges of the bodies of functions whose name holds `reason`.
fn reason_functions(code: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ") {
        let start = from + at + 3;
        from = start;
        let name: String =
            code[start..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.contains("reason") {
            continue;
        }
        let Some(open) = code[start..].find('{').map(|o| start + o) else { break };
        let mut depth = 0;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                ranges.push((open, open + i));
                break;
            }
        }
    }
    ranges
}

/// Every reason of the source, with the crates that give it.
pub fn in_code(workspace: &Path) -> BTreeMap<String, BTreeSet<&'static str>> {
    let mut found: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    for krate in CRATES {
        let mut files = Vec::new();
        rust_files(&workspace.join("crates").join(krate).join("src"), &mut files);
        assert!(!files.is_empty(), "{krate}'s sources were found");
        for file in files.iter().filter(|f| !f.ends_with("tests.rs")) {
            let code = code(file);
            let mut ranges = reason_functions(&code);
            ranges.extend(reason_lets(&code));
            for (at, literal) in literals(&code) {
                if !is_reason_like(literal) {
                    continue;
                }
                let before = &code[..at];
                let after_value =
                    ["EventType::Normal, ", "EventType::Warning, ", "Phase::Failed, "];
                let reason = before.ends_with("reason: ")
                    || after_value.iter().any(|v| before.ends_with(v))
                    || ranges.iter().any(|(start, end)| (*start..*end).contains(&at))
                    || enclosing_call(&code, at).is_some_and(|call| CALLS.contains(&call))
                    || (CONSTANT_CRATES.contains(&krate) && names_a_constant(before));
                if reason {
                    found.entry(literal.to_owned()).or_default().insert(krate);
                }
            }
        }
    }
    found
}

/// Whether `reason` is a string literal anywhere in the crates' non-test code.
pub fn named_in_code(workspace: &Path, reason: &str) -> bool {
    let quoted = format!("\"{reason}\"");
    CRATES.iter().any(|krate| {
        let mut files = Vec::new();
        rust_files(&workspace.join("crates").join(krate).join("src"), &mut files);
        files.iter().filter(|f| !f.ends_with("tests.rs")).any(|f| code(f).contains(&quoted))
    })
}

#[test]
fn the_scan_finds_reasons_where_they_are_given() {
    let code = r#"fn f() { ctx.event(claim, EventType::Normal, "BucketKept", &m).await; let x = "NotAReason"; BackendError::permanent( "OwnerSecretInvalid", format!("a {}", "NotEither")); } fn reason(&self) -> &str { match self { A => "ShareWithdrawn" } } let reason = match a { B => { return x(); } _ => "NotFound" }; f("AccessDenied");"#;
    let found: Vec<&str> = literals(code)
        .into_iter()
        .filter(|(at, l)| {
            is_reason_like(l)
                && (enclosing_call(code, *at).is_some_and(|c| CALLS.contains(&c))
                    || reason_functions(code).iter().any(|(s, e)| (*s..*e).contains(at))
                    || reason_lets(code).iter().any(|(s, e)| (*s..*e).contains(at)))
        })
        .map(|(_, l)| l)
        .collect();
    assert_eq!(found, ["BucketKept", "OwnerSecretInvalid", "ShareWithdrawn", "NotFound"]);
}
