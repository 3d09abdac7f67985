//! The book's reference (`docs/src/reference/`) cannot drift from the code:
//!
//! - `crds.md` is generated from the CRDs `crdgen` writes (`bucket_api::crd_files`, the same
//!   objects as `crds/`): every field with its type, limits and description; the test fails when
//!   the committed page differs, and `UPDATE_REFERENCE=1` rewrites it;
//! - `storageclass-parameters.md` and `additional-config.md` are written by hand (type, default,
//!   meaning), and their tables must list exactly the parameters and keys each backend accepts
//!   (the backends' `PARAMETERS` and `ACCEPTED` lists and the controller's own), with the right
//!   backends marked: the test fails both ways;
//! - `reasons.md` likewise lists exactly the condition and Event reasons the code sets (see
//!   `tests/reference/reasons.rs`);
//! - `chart-values.md` is generated from the chart's `values.yaml`: every value, its default and
//!   the comment above it.
//!
//! The flags' pages are checked beside each binary (`crates/*/tests/flags_reference.rs`).

#[path = "reference/reasons.rs"]
mod reasons;
#[path = "reference/tables.rs"]
mod tables;

use std::collections::BTreeSet;
use std::fmt::Write;

use serde_json::Value;
use test_support::reference::check_generated;

const TEST: &str = "cargo test -p integration-tests --test reference";

/// A description on one line, safe in a table cell.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// The type of a schema, as a reader says it: `string`, `[]object`, `map[string]string`, ...
fn type_of(schema: &Value) -> String {
    match schema["type"].as_str() {
        Some("array") => format!("[]{}", type_of(&schema["items"])),
        Some("object") if schema["additionalProperties"].is_object() => {
            format!("map[string]{}", type_of(&schema["additionalProperties"]))
        }
        Some(other) => other.to_owned(),
        None if schema["x-kubernetes-int-or-string"] == true => "int or string".to_owned(),
        None => "any".to_owned(),
    }
}

/// What a field's schema allows beyond its type: required, default, pattern, bounds, format.
fn limits(schema: &Value, required: bool) -> String {
    let mut out = Vec::new();
    if required {
        out.push("required".to_owned());
    }
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        out.push(format!("one of {}", values.join(", ")));
    }
    for (key, name) in [
        ("default", "default"),
        ("format", "format"),
        ("pattern", "pattern"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minimum", "minimum"),
        ("maximum", "maximum"),
        ("maxItems", "max items"),
    ] {
        if let Some(value) = schema.get(key) {
            let value = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
            out.push(format!("{name} `{value}`"));
        }
    }
    for rule in schema["x-kubernetes-validations"].as_array().into_iter().flatten() {
        if let Some(message) = rule["message"].as_str() {
            out.push(format!("rule: {message}"));
        }
    }
    out.join("; ")
}

/// One row per field under `schema`, depth first in name order, `path` the parent's.
fn fields(schema: &Value, path: &str, rows: &mut String) {
    let (properties, required) = match type_of(schema).as_str() {
        t if t.starts_with("[]") => (&schema["items"]["properties"], &schema["items"]["required"]),
        t if t.starts_with("map[") => (
            &schema["additionalProperties"]["properties"],
            &schema["additionalProperties"]["required"],
        ),
        _ => (&schema["properties"], &schema["required"]),
    };
    let Some(properties) = properties.as_object() else { return };
    let required: BTreeSet<&str> =
        required.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut names: Vec<&String> = properties.keys().collect();
    names.sort();
    for name in names {
        let field = &properties[name];
        let field_path = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
        let description = field["description"].as_str().unwrap_or_default();
        let limits = limits(field, required.contains(name.as_str()));
        let _ = writeln!(
            rows,
            "| `{field_path}` | `{}` | {} | {} |",
            type_of(field),
            cell(description),
            cell(&limits)
        );
        let child = match type_of(field) {
            t if t.starts_with("[]") => format!("{field_path}[]"),
            t if t.starts_with("map[") => format!("{field_path}.*"),
            _ => field_path,
        };
        fields(field, &child, rows);
    }
}

/// The CRD reference page, from the CRDs as `crdgen` writes them.
fn crd_page() -> String {
    let mut page = String::from(
        "# CRD fields\n\n\
         <!-- Generated from crates/bucket-api (the CRDs `make crds` writes under crds/) by \
         tests/reference.rs; do not edit: `UPDATE_REFERENCE=1 cargo test -p integration-tests \
         --test reference` rewrites it. -->\n\n\
         Every field of the project's own CRDs, as the apiserver validates them. `metadata` is \
         the usual Kubernetes object metadata. COSI's CRDs are upstream's (see \
         [COSI](../running/cosi.md)).\n",
    );
    for file in bucket_api::crd_files() {
        let crd = serde_json::to_value(&file.crd).expect("a CRD is JSON");
        let spec = &crd["spec"];
        let kind = spec["names"]["kind"].as_str().unwrap_or_default();
        for version in spec["versions"].as_array().into_iter().flatten() {
            let name = version["name"].as_str().unwrap_or_default();
            let schema = &version["schema"]["openAPIV3Schema"];
            let _ = write!(page, "\n## {kind}\n\n`{}/{name}`, ", spec["group"].as_str().unwrap());
            let scope = spec["scope"].as_str().unwrap_or_default().to_lowercase();
            let _ = write!(page, "{scope}");
            if let Some(short) = spec["names"]["shortNames"].as_array() {
                let short: Vec<String> =
                    short.iter().map(|s| format!("`{}`", s.as_str().unwrap())).collect();
                let _ = write!(page, "; short names {}", short.join(", "));
            }
            let _ =
                writeln!(page, ". {}\n", cell(schema["description"].as_str().unwrap_or_default()));
            page.push_str("| field | type | description | limits |\n|---|---|---|---|\n");
            let mut rows = String::new();
            let mut top = schema.clone();
            if let Some(properties) = top["properties"].as_object_mut() {
                properties.remove("metadata");
                properties.remove("apiVersion");
                properties.remove("kind");
            }
            fields(&top, "", &mut rows);
            page.push_str(&rows);
        }
    }
    page
}

/// The chart's values page, from `values.yaml`: each key's path, its default (mappings with
/// keys of their own have a row per key instead) and the comment lines just above it.
fn chart_values_page() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/bucket-provisioner/values.yaml");
    let text = std::fs::read_to_string(&path).expect("values.yaml");
    let values: Value = serde_yaml::from_str(&text).expect("values.yaml is YAML");
    let mut page = String::from(
        "# Helm chart values\n\n\
         <!-- Generated from charts/bucket-provisioner/values.yaml by tests/reference.rs; do not \
         edit: `UPDATE_REFERENCE=1 cargo test -p integration-tests --test reference` rewrites \
         it. -->\n\n\
         Every value of the chart in `charts/bucket-provisioner`, with its default and what \
         `values.yaml` says of it; `values.schema.json` checks each at install and upgrade \
         ([Installing with Helm](../running/helm.md)).\n\n\
         | value | default | meaning |\n|---|---|---|\n",
    );
    let mut keys: Vec<(usize, String)> = Vec::new();
    let mut comment: Vec<&str> = Vec::new();
    let mut list_under: Option<usize> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() {
            comment.clear();
            continue;
        }
        if let Some(key_indent) = list_under {
            if indent > key_indent {
                continue;
            }
            list_under = None;
        }
        if let Some(text) = trimmed.strip_prefix('#') {
            comment.push(text.trim());
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else { continue };
        while keys.last().is_some_and(|(i, _)| *i >= indent) {
            keys.pop();
        }
        keys.push((indent, key.to_owned()));
        let pointer: String = keys.iter().map(|(_, k)| format!("/{k}")).collect();
        let value = values.pointer(&pointer).unwrap_or(&Value::Null);
        let default = match value {
            Value::Object(map) if !map.is_empty() => String::new(),
            Value::Array(items) if !items.is_empty() => {
                list_under = Some(indent);
                format!("`{value}`")
            }
            Value::String(text) if text.is_empty() => "`\"\"`".to_owned(),
            Value::String(text) => format!("`{text}`"),
            other => format!("`{other}`"),
        };
        let name: Vec<&str> = keys.iter().map(|(_, k)| k.as_str()).collect();
        let meaning = cell(&comment.join(" "));
        let _ = writeln!(page, "| `{}` | {} | {meaning} |", name.join("."), cell(&default));
        comment.clear();
    }
    page
}

#[test]
fn the_chart_values_page_is_what_values_yaml_says() {
    check_generated("chart-values.md", &chart_values_page(), TEST);
}

#[test]
fn the_crd_reference_is_what_the_types_generate() {
    check_generated("crds.md", &crd_page(), TEST);
}

#[test]
fn the_storageclass_parameters_page_lists_what_each_backend_accepts() {
    tables::check_page("storageclass-parameters.md", &tables::class_parameters());
}

#[test]
fn the_additional_config_page_lists_what_each_backend_accepts() {
    tables::check_page("additional-config.md", &tables::claim_keys());
}

/// Strings the scan finds in a reason's place that are no reason a user meets.
const NOT_REASONS: [(&str, &str); 2] = [
    ("Ready", "the type of the claim's condition, whose reasons these are"),
    ("Injected", "the faults the runtime's mock apiserver injects for its own tests"),
];

#[test]
fn the_reasons_page_lists_every_reason_the_code_gives() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = test_support::reference::reference_file("reasons.md");
    let page = std::fs::read_to_string(&path).unwrap_or_default();
    let documented: BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect();
    let mut in_code = reasons::in_code(&workspace);
    for (name, _why) in NOT_REASONS {
        in_code.remove(name);
    }
    assert!(in_code.len() >= 50, "the scan found the reasons ({})", in_code.len());
    let mut wrong: Vec<String> = in_code
        .iter()
        .filter(|(reason, _)| !documented.contains(*reason))
        .map(|(reason, crates)| format!("{reason} (given in {crates:?}) has no row"))
        .collect();
    for reason in documented.iter().filter(|r| !in_code.contains_key(*r)) {
        if !reasons::named_in_code(&workspace, reason) {
            wrong.push(format!("{reason} has a row, but the code never gives it"));
        }
    }
    assert!(wrong.is_empty(), "docs/src/reference/reasons.md and the code disagree: {wrong:#?}");
}
