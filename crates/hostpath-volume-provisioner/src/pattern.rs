//! Where under the root a volume's directory goes: the StorageClass parameter `pathPattern`,
//! expanded for one claim and checked so that no claim, namespace or pattern can name a place
//! outside the root or inside the provisioner's own records.

use std::path::PathBuf;

/// The pattern used when the class sets none: one directory per PV, as the seeds did.
pub const DEFAULT_PATTERN: &str = "{pvName}";

/// A pattern that cannot make a safe relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pathPattern {pattern:?}: {problem}")]
pub struct PatternError {
    pattern: String,
    problem: String,
}

/// What the placeholders stand for.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a> {
    /// `{pvName}`: the PV's name, `pvc-<claim uid>`.
    pub pv_name: &'a str,
    /// `{namespace}`: the claim's namespace.
    pub namespace: &'a str,
    /// `{name}`: the claim's name.
    pub name: &'a str,
}

/// Expands `pattern` for `names` into a path relative to the root: segments separated by `/`,
/// none empty, `.`, `..` or starting with `.` (the records live in `.provisioner`), none longer
/// than 255 bytes, with only the placeholders `{pvName}`, `{namespace}` and `{name}`.
pub fn expand(pattern: &str, names: Names<'_>) -> Result<PathBuf, PatternError> {
    let fail = |problem: String| PatternError { pattern: pattern.to_owned(), problem };
    if !pattern.contains("{pvName}") && !names_each_claim_apart(pattern) {
        // Otherwise a tenant's claim could take the directory another namespace's claim of the
        // same name needs, and block it for good.
        return Err(fail(
            "must contain {pvName}, or {namespace} and {name} in segments of their own (as in \
             {namespace}/{name}), so that no two claims anywhere share a directory"
                .into(),
        ));
    }
    let mut expanded = String::new();
    let mut rest = pattern;
    while let Some(open) = rest.find('{') {
        expanded.push_str(&rest[..open]);
        let close = rest[open..].find('}').ok_or_else(|| fail("an unclosed '{'".into()))? + open;
        expanded.push_str(match &rest[open + 1..close] {
            "pvName" => names.pv_name,
            "namespace" => names.namespace,
            "name" => names.name,
            other => {
                return Err(fail(format!(
                    "unknown placeholder {{{other}}}; use {{pvName}}, {{namespace}} or {{name}}"
                )));
            }
        });
        rest = &rest[close + 1..];
    }
    expanded.push_str(rest);
    if expanded.contains('}') {
        return Err(fail("a '}' without '{'".into()));
    }
    let mut path = PathBuf::new();
    for segment in expanded.split('/') {
        let problem = if segment.is_empty() {
            Some("an empty segment (a leading, trailing or doubled '/')".to_owned())
        } else if segment.starts_with('.') {
            Some(format!("segment {segment:?} starts with '.'"))
        } else if segment.len() > 255 {
            Some(format!("segment {segment:?} is longer than 255 bytes"))
        } else if segment.contains('\0') {
            Some("a NUL byte".to_owned())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(fail(format!("it makes {expanded:?}, which has {problem}")));
        }
        path.push(segment);
    }
    Ok(path)
}

/// Whether `{namespace}` and `{name}` both appear, each in a segment without the other. Names
/// never contain `/`, so such a path tells every claim apart; in one segment they do not
/// (`a-b` + `c` and `a` + `b-c` both make `a-b-c`).
fn names_each_claim_apart(pattern: &str) -> bool {
    let segment_of = |placeholder: &str| pattern.split('/').position(|s| s.contains(placeholder));
    match (segment_of("{namespace}"), segment_of("{name}")) {
        (Some(namespace), Some(name)) => {
            namespace != name
                && !pattern.split('/').any(|s| s.contains("{namespace}") && s.contains("{name}"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: Names<'static> = Names { pv_name: "pvc-1", namespace: "app", name: "data" };

    #[test]
    fn placeholders_expand_to_a_relative_path() {
        assert_eq!(expand(DEFAULT_PATTERN, NAMES).unwrap(), PathBuf::from("pvc-1"));
        assert_eq!(expand("{namespace}/{name}", NAMES).unwrap(), PathBuf::from("app/data"));
        assert_eq!(
            expand("volumes/{namespace}-{name}-{pvName}", NAMES).unwrap(),
            PathBuf::from("volumes/app-data-pvc-1")
        );
    }

    #[test]
    fn claims_of_different_namespaces_never_share_a_directory() {
        for pattern in ["{name}", "x/{name}", "{namespace}-{name}", "{namespace}{name}/x"] {
            let error = expand(pattern, NAMES).unwrap_err().to_string();
            assert!(error.contains("{namespace} and {name}"), "{pattern:?}: {error}");
        }
        for pattern in ["{namespace}/{name}", "{name}/x-{namespace}", "{name}-{pvName}", "{pvName}"]
        {
            assert!(expand(pattern, NAMES).is_ok(), "{pattern:?} was refused");
        }
        // The two namespaces' claims that would collide in one segment stay apart.
        let a = Names { pv_name: "pvc-1", namespace: "a-b", name: "c" };
        let b = Names { pv_name: "pvc-2", namespace: "a", name: "b-c" };
        let pattern = "{namespace}/{name}";
        assert_ne!(expand(pattern, a).unwrap(), expand(pattern, b).unwrap());
    }

    #[test]
    fn nothing_escapes_the_root_or_reaches_the_records() {
        for pattern in [
            "../{pvName}",
            "/etc/{pvName}",
            "{namespace}/../../{name}",
            "a//{name}",
            "{name}/",
            ".provisioner/{pvName}",
            "{namespace}/./{name}",
            "{namespace}",
            "static",
            "{uid}/{name}",
            "{name",
            "name}{pvName}",
        ] {
            assert!(expand(pattern, NAMES).is_err(), "{pattern:?} was accepted");
        }
        // Names are the apiserver's to validate, but a dot-name never passes either.
        let dotted = Names { pv_name: "pvc-1", namespace: "..", name: "x" };
        assert!(expand("{namespace}/{name}", dotted).is_err());
    }

    mod properties {
        use std::path::Component;

        use proptest::prelude::*;

        use super::*;

        /// Patterns made of the pieces patterns are made of.
        fn pattern() -> impl Strategy<Value = String> {
            let atom = prop_oneof![
                Just("{pvName}"),
                Just("{namespace}"),
                Just("{name}"),
                Just("x"),
                Just("-"),
                Just("."),
                Just("{"),
                Just("}"),
                Just("/"),
                Just("{uid}"),
            ];
            prop::collection::vec(atom, 1..8).prop_map(|atoms| atoms.concat())
        }

        /// Names as the apiserver allows them, from a small alphabet so that they meet.
        const NAME: &str = "[ab]([ab.-]{0,2}[ab])?";

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]

            #[test]
            fn any_pattern_and_names_give_a_path_inside_the_root_or_an_error(
                pattern in prop_oneof![any::<String>(), pattern()],
                namespace in prop_oneof![any::<String>(), NAME],
                name in prop_oneof![any::<String>(), NAME],
            ) {
                let names = Names { pv_name: "pvc-1", namespace: &namespace, name: &name };
                if let Ok(path) = expand(&pattern, names) {
                    prop_assert!(path.components().count() > 0);
                    for component in path.components() {
                        let Component::Normal(part) = component else {
                            return Err(TestCaseError::fail(format!("{path:?}")));
                        };
                        prop_assert!(!part.to_string_lossy().starts_with('.'), "{:?}", path);
                    }
                }
            }

            #[test]
            fn two_claims_never_get_one_directory(
                pattern in pattern(),
                (ns_a, name_a, ns_b, name_b) in (NAME, NAME, NAME, NAME),
            ) {
                prop_assume!((&ns_a, &name_a) != (&ns_b, &name_b));
                let a = Names { pv_name: "pvc-1", namespace: &ns_a, name: &name_a };
                let b = Names { pv_name: "pvc-2", namespace: &ns_b, name: &name_b };
                if let (Ok(path_a), Ok(path_b)) = (expand(&pattern, a), expand(&pattern, b)) {
                    prop_assert_ne!(path_a, path_b, "{}", pattern);
                }
            }
        }
    }
}
