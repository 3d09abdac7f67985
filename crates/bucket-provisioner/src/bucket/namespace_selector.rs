//! The operator's limit on which namespaces may share from claims of a StorageClass: the class
//! parameter `crossNamespaceSharingNamespaceSelector`, a label selector of namespaces.
//!
//! Its form is the equality subset of a Kubernetes label selector: terms separated by commas,
//! each `key=value` (the namespace has label `key` valued `value`) or `key` (it has label `key`,
//! whatever its value), all of which must hold; spaces around a term are ignored. Keys and values
//! are checked as Kubernetes checks labels. Anything else (`!=`, `==`, `!key`, `in (...)`, an
//! empty term, a key twice) is an error naming the term: a selector read half-way would let in
//! namespaces the operator did not mean to.

use std::collections::BTreeMap;

use bucket_api::contract::class_sharing::CROSS_NAMESPACE_SHARING_NAMESPACE_SELECTOR as PARAMETER;

use crate::bucket::grant_rules::{is_dns_subdomain, quoted};

/// One term of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Term {
    /// The label is there with this value.
    Equals(String, String),
    /// The label is there, whatever its value.
    Exists(String),
}

/// A selector that passed every check: namespaces matching all its terms may share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceSelector {
    /// Its terms, at least one, each key once.
    pub terms: Vec<Term>,
}

/// Whether `name` is the name part of a label key, or (`value`) a non-empty label value: at
/// most 63 of `[A-Za-z0-9._-]`, a letter or digit at either end.
fn is_label_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    (1..=63).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && edge(name.chars().next())
        && edge(name.chars().last())
}

/// Whether `key` is a label key: a name, or `prefix/name` with a DNS subdomain as prefix.
pub fn is_label_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty() && is_dns_subdomain(prefix) && is_label_name(name)
        }
        None => is_label_name(key),
    }
}

/// Whether `value` is a label value: empty, or as [`is_label_name`].
pub fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_label_name(value)
}

/// Reads one term (the `index`th, from 1); the error says what is wrong with it.
fn term(index: usize, text: &str) -> Result<Term, String> {
    let at = || format!("term {index} {}", quoted(text));
    if text.is_empty() {
        return Err(format!("term {index} is empty (a ',' too many?)"));
    }
    if text.contains("!=") || text.contains("==") || text.starts_with('!') || text.contains('(') {
        return Err(format!(
            "{}: only `key=value` and `key` terms are supported (no `!=`, `==`, `!key` or \
             set-based terms)",
            at()
        ));
    }
    let (key, value) = match text.split_once('=') {
        Some((key, value)) => (key, Some(value)),
        None => (text, None),
    };
    if !is_label_key(key) {
        return Err(format!(
            "{}: {} is not a label key ([prefix/]name, the name at most 63 of letters, digits, \
             '-', '_' and '.')",
            at(),
            quoted(key)
        ));
    }
    match value {
        Some(value) if !is_label_value(value) => Err(format!(
            "{}: {} is not a label value (at most 63 of letters, digits, '-', '_' and '.')",
            at(),
            quoted(value)
        )),
        Some(value) => Ok(Term::Equals(key.to_owned(), value.to_owned())),
        None => Ok(Term::Exists(key.to_owned())),
    }
}

/// Reads a selector; the error names the first term that is wrong and why.
pub fn parse(text: &str) -> Result<NamespaceSelector, String> {
    if text.trim().is_empty() {
        return Err("is empty; remove the parameter to let in every namespace a grant names".into());
    }
    let mut terms: Vec<Term> = Vec::new();
    for (index, piece) in text.split(',').enumerate() {
        let read = term(index + 1, piece.trim_matches(' '))?;
        let key = read.key();
        if terms.iter().any(|t| t.key() == key) {
            return Err(format!("term {} names label {} a second time", index + 1, quoted(key)));
        }
        terms.push(read);
    }
    Ok(NamespaceSelector { terms })
}

impl Term {
    /// The label the term is about.
    pub fn key(&self) -> &str {
        match self {
            Term::Equals(key, _) | Term::Exists(key) => key,
        }
    }
}

impl NamespaceSelector {
    /// Whether a namespace with `labels` matches every term.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().all(|term| match term {
            Term::Equals(key, value) => labels.get(key) == Some(value),
            Term::Exists(key) => labels.contains_key(key),
        })
    }
}

/// Reads (and removes) the class's namespace selector from its parameters: `None` when unset
/// (any namespace a grant names may share, where the class allows sharing at all).
pub(crate) fn take_selector(
    parameters: &mut BTreeMap<String, String>,
) -> Result<Option<NamespaceSelector>, String> {
    match parameters.remove(PARAMETER) {
        None => Ok(None),
        Some(text) => parse(&text).map(Some).map_err(|e| format!("parameter {PARAMETER} {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_term_must_hold_and_a_bare_key_asks_only_for_the_label() {
        let selector = parse("example.com/sharing=allowed, tier").unwrap();
        assert!(selector.matches(&labels(&[("example.com/sharing", "allowed"), ("tier", "")])));
        assert!(selector.matches(&labels(&[("example.com/sharing", "allowed"), ("tier", "x")])));
        assert!(!selector.matches(&labels(&[("example.com/sharing", "allowed")])));
        assert!(!selector.matches(&labels(&[("example.com/sharing", "no"), ("tier", "x")])));
        assert!(!selector.matches(&labels(&[])));
        let empty_value = parse("team=").unwrap();
        assert!(empty_value.matches(&labels(&[("team", "")])));
        assert!(!empty_value.matches(&labels(&[("team", "a")])));
    }

    #[test]
    fn anything_else_is_refused_naming_the_term() {
        for (bad, why) in [
            ("", "is empty"),
            ("  ", "is empty"),
            ("a=b,", "term 2 is empty"),
            ("a=b,,c", "term 2 is empty"),
            ("a!=b", "only `key=value` and `key`"),
            ("a==b", "only `key=value` and `key`"),
            ("!a", "only `key=value` and `key`"),
            ("a in (b)", "only `key=value` and `key`"),
            ("a=b=c", "\"b=c\" is not a label value"),
            ("a b=c", "\"a b\" is not a label key"),
            ("-a=b", "is not a label key"),
            ("A/b=c", "is not a label key"),
            ("/b=c", "is not a label key"),
            ("a=-b", "is not a label value"),
            ("a=b,a", "term 2 names label \"a\" a second time"),
        ] {
            let error = parse(bad).expect_err(bad);
            assert!(error.contains(why), "{bad:?}: {error:?} should contain {why:?}");
        }
        let long = format!("{}=x", "a".repeat(10_000));
        assert!(parse(&long).unwrap_err().len() < 300, "a long value is quoted short");
    }

    #[test]
    fn the_parameter_is_taken_from_the_class_and_named_in_its_error() {
        let mut parameters = BTreeMap::from([(PARAMETER.to_owned(), "a=b".to_owned())]);
        assert!(take_selector(&mut parameters).unwrap().is_some());
        assert!(parameters.is_empty(), "never passed to the backend");
        assert_eq!(take_selector(&mut BTreeMap::new()), Ok(None));
        let mut parameters = BTreeMap::from([(PARAMETER.to_owned(), "a!=b".to_owned())]);
        let error = take_selector(&mut parameters).unwrap_err();
        assert!(error.starts_with(&format!("parameter {PARAMETER} term 1")), "{error}");
    }

    proptest! {
        /// Any text: parsed without a panic; an accepted selector holds only valid keys and
        /// values, each key once, and matches a namespace exactly when every term holds.
        #[test]
        fn any_selector_is_either_refused_or_holds_only_valid_terms(
            text in "[a-z0-9=,!./ -]{0,24}|\\PC{0,16}",
            present in proptest::collection::btree_map("[a-c]", "[a-c]{0,1}", 0..4),
        ) {
            match parse(&text) {
                Ok(selector) => {
                    prop_assert!(!selector.terms.is_empty());
                    let mut keys = Vec::new();
                    for term in &selector.terms {
                        prop_assert!(is_label_key(term.key()));
                        if let Term::Equals(_, value) = term {
                            prop_assert!(is_label_value(value));
                        }
                        prop_assert!(!keys.contains(&term.key()));
                        keys.push(term.key());
                    }
                    let every = selector.terms.iter().all(|t| match t {
                        Term::Equals(k, v) => present.get(k) == Some(v),
                        Term::Exists(k) => present.contains_key(k),
                    });
                    prop_assert_eq!(selector.matches(&present), every);
                }
                Err(error) => prop_assert!(!error.is_empty() && error.len() < 400),
            }
        }

        /// A selector written from valid terms reads back as those terms.
        #[test]
        fn valid_terms_read_back(
            terms in proptest::collection::btree_map(
                "[a-z]{1,5}(\\.[a-z]{1,5})?/[a-z]{1,5}|[a-z]{1,8}",
                proptest::option::of("[A-Za-z0-9]([A-Za-z0-9._-]{0,8}[A-Za-z0-9])?|"),
                1..5,
            ),
        ) {
            let text: Vec<String> = terms
                .iter()
                .map(|(k, v)| v.as_ref().map_or_else(|| k.clone(), |v| format!("{k}={v}")))
                .collect();
            let selector = parse(&text.join(", ")).unwrap();
            let expected: Vec<Term> = terms
                .into_iter()
                .map(|(k, v)| match v {
                    Some(v) => Term::Equals(k, v),
                    None => Term::Exists(k),
                })
                .collect();
            prop_assert_eq!(selector.terms, expected);
        }
    }
}
