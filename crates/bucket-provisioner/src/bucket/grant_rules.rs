//! Reading a [`BucketShareGrant`] and a cross-namespace `shareFrom` as hostile input: both are
//! tenant-written, so each field is checked here whatever the CRD's schema let through, and a
//! grant with one bad field grants nothing at all (a half-read grant would be a guess at what
//! its author meant).

use bucket_api::{AccessMode, BucketShareGrantSpec, GRANTEE_KIND, MAX_GRANTEES};

/// A grant that passed every check: what it lets in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRules {
    /// The claim of the grant's namespace whose bucket may be shared.
    pub claim: String,
    /// Who may share it.
    pub to: Vec<Allowed>,
}

/// One entry of a grant's `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allowed {
    /// The namespace let in.
    pub namespace: String,
    /// The one claim of it let in; `None`: all of them.
    pub claim: Option<String>,
    /// The widest mode it may get.
    pub mode: AccessMode,
}

/// The longest piece of a tenant's value quoted back in an error.
const QUOTED: usize = 64;

/// `value` quoted for an error message, cut short: a hostile value never fills a status.
pub(crate) fn quoted(value: &str) -> String {
    match value.char_indices().nth(QUOTED) {
        Some((end, _)) => format!("{:?}…", &value[..end]),
        None => format!("{value:?}"),
    }
}

/// Whether `name` is a DNS label (a namespace's name): `[a-z0-9-]`, at most 63, no dash at
/// either end.
pub fn is_dns_label(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` is a DNS subdomain (an object's name): dot-separated DNS labels, at most 253.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

fn check_name(field: &str, value: &str, valid: fn(&str) -> bool) -> Result<(), String> {
    if value.contains('*') {
        return Err(format!(
            "{field} {}: wildcards are not supported; name each one",
            quoted(value)
        ));
    }
    if !valid(value) {
        return Err(format!(
            "{field} {} is not a valid name (lower-case letters, digits and '-', no '/' or '..')",
            quoted(value)
        ));
    }
    Ok(())
}

/// Reads a grant's spec; the error names the first field that is wrong and why.
pub fn parse(spec: &BucketShareGrantSpec) -> Result<GrantRules, String> {
    check_name("claimName", &spec.claim_name, is_dns_subdomain)?;
    if spec.to.len() > MAX_GRANTEES {
        return Err(format!(
            "to lists {} entries, more than the {MAX_GRANTEES} allowed; grant a namespace \
             rather than each of its claims, or split the grant",
            spec.to.len()
        ));
    }
    let mut to = Vec::with_capacity(spec.to.len());
    for (index, entry) in spec.to.iter().enumerate() {
        let field = |name: &str| format!("to[{index}].{name}");
        if let Some(kind) = entry.kind.as_deref().filter(|k| *k != GRANTEE_KIND) {
            return Err(format!(
                "{} {} is not supported; only {GRANTEE_KIND} can share a bucket",
                field("kind"),
                quoted(kind)
            ));
        }
        check_name(&field("namespace"), &entry.namespace, is_dns_label)?;
        if let Some(claim) = &entry.claim_name {
            check_name(&field("claimName"), claim, is_dns_subdomain)?;
        }
        let mode = match entry.access_mode.as_deref() {
            None => AccessMode::ReadOnly,
            Some(text) => AccessMode::parse(text).ok_or_else(|| {
                format!(
                    "{} {} is not an access mode; use ReadOnly, WriteOnly or ReadWrite",
                    field("accessMode"),
                    quoted(text)
                )
            })?,
        };
        to.push(Allowed {
            namespace: entry.namespace.clone(),
            claim: entry.claim_name.clone(),
            mode,
        });
    }
    Ok(GrantRules { claim: spec.claim_name.clone(), to })
}

impl GrantRules {
    /// The widest mode this grant gives claim `claim` of `namespace` on the bucket of claim
    /// `owner`; `None` if it lets it in not at all. `ReadOnly` and `WriteOnly` both granted
    /// give `ReadOnly`: two entries never add up to more than one of them says.
    pub fn mode_for(&self, owner: &str, namespace: &str, claim: &str) -> Option<AccessMode> {
        if self.claim != owner {
            return None;
        }
        let matching = self
            .to
            .iter()
            .filter(|a| a.namespace == namespace && a.claim.as_deref().is_none_or(|c| c == claim));
        matching.map(|a| a.mode).reduce(widest)
    }
}

/// The wider of two modes; of the two narrow ones, `ReadOnly`.
pub fn widest(a: AccessMode, b: AccessMode) -> AccessMode {
    if a.covers(b) {
        a
    } else if b.covers(a) {
        b
    } else {
        AccessMode::ReadOnly
    }
}

/// The narrowest mode both allow: `None` when they share nothing (`ReadOnly` and `WriteOnly`).
pub fn narrowest(a: AccessMode, b: AccessMode) -> Option<AccessMode> {
    if a.covers(b) {
        Some(b)
    } else if b.covers(a) {
        Some(a)
    } else {
        None
    }
}

/// A `shareFrom` of the form `<namespace>/<claim>`, split; `None` for any other text (a name
/// without a namespace is looked up in the claim's own namespace, as before).
pub fn split_share_from(text: &str) -> Option<(&str, &str)> {
    let (namespace, claim) = text.split_once('/')?;
    (is_dns_label(namespace) && is_dns_subdomain(claim)).then_some((namespace, claim))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bucket_api::Grantee;
    use proptest::prelude::*;

    fn grantee(namespace: &str, claim: Option<&str>, mode: Option<&str>) -> Grantee {
        Grantee {
            kind: None,
            namespace: namespace.into(),
            claim_name: claim.map(Into::into),
            access_mode: mode.map(Into::into),
        }
    }

    fn spec(claim: &str, to: Vec<Grantee>) -> BucketShareGrantSpec {
        BucketShareGrantSpec { claim_name: claim.into(), to }
    }

    #[test]
    fn a_grant_lets_in_what_it_names_with_read_only_by_default() {
        let rules = parse(&spec(
            "photos",
            vec![grantee("team-b", None, None), grantee("team-c", Some("etl"), Some("ReadWrite"))],
        ))
        .unwrap();
        assert_eq!(rules.mode_for("photos", "team-b", "any"), Some(AccessMode::ReadOnly));
        assert_eq!(rules.mode_for("photos", "team-c", "etl"), Some(AccessMode::ReadWrite));
        assert_eq!(rules.mode_for("photos", "team-c", "other"), None);
        assert_eq!(rules.mode_for("videos", "team-b", "any"), None);
        assert_eq!(rules.mode_for("photos", "team-d", "any"), None);
    }

    #[test]
    fn several_entries_give_the_widest_and_read_only_with_write_only_give_read_only() {
        let both = |a, b| {
            let to = vec![grantee("b", None, Some(a)), grantee("b", Some("c"), Some(b))];
            parse(&spec("x", to)).unwrap().mode_for("x", "b", "c")
        };
        assert_eq!(both("ReadOnly", "ReadWrite"), Some(AccessMode::ReadWrite));
        assert_eq!(both("ReadOnly", "WriteOnly"), Some(AccessMode::ReadOnly));
        assert_eq!(narrowest(AccessMode::ReadOnly, AccessMode::WriteOnly), None);
        assert_eq!(
            narrowest(AccessMode::ReadWrite, AccessMode::WriteOnly),
            Some(AccessMode::WriteOnly)
        );
    }

    #[test]
    fn hostile_grants_are_refused_naming_the_field() {
        let cases: Vec<(BucketShareGrantSpec, &str)> = vec![
            (spec("*", vec![]), "claimName \"*\": wildcards"),
            (spec("../x", vec![]), "claimName \"../x\" is not a valid name"),
            (spec("x", vec![grantee("*", None, None)]), "to[0].namespace \"*\": wildcards"),
            (spec("x", vec![grantee("a/b", None, None)]), "to[0].namespace \"a/b\" is not"),
            (spec("x", vec![grantee("b", Some("../../etc"), None)]), "to[0].claimName"),
            (spec("x", vec![grantee("b", None, Some("Admin"))]), "to[0].accessMode \"Admin\""),
            (spec("x", vec![grantee("b", None, Some("readonly"))]), "not an access mode"),
            (
                spec("x", vec![Grantee { kind: Some("Pod".into()), ..grantee("b", None, None) }]),
                "to[0].kind \"Pod\" is not supported",
            ),
            (spec("x", vec![grantee("b", None, None); MAX_GRANTEES + 1]), "more than the 64"),
        ];
        for (spec, expected) in cases {
            let error = parse(&spec).expect_err(expected);
            assert!(error.contains(expected), "{error:?} should contain {expected:?}");
        }
        let long = "a".repeat(10_000);
        let error = parse(&spec(&long, vec![])).unwrap_err();
        assert!(error.len() < 200, "a hostile value is quoted short: {error}");
    }

    #[test]
    fn share_from_across_namespaces_is_namespace_slash_claim() {
        assert_eq!(split_share_from("team-a/photos"), Some(("team-a", "photos")));
        for bad in ["photos", "a/b/c", "/x", "x/", "*/x", "A/x", "../x", "a/.."] {
            assert_eq!(split_share_from(bad), None, "{bad}");
        }
    }

    fn any_grantee() -> impl Strategy<Value = Grantee> {
        let text = "[a-z0-9*./-]{0,12}|\\PC{0,8}";
        (
            proptest::option::of(prop_oneof![Just("ObjectBucketClaim".to_owned()), text]),
            text,
            proptest::option::of(text),
            proptest::option::of(prop_oneof![
                Just("ReadOnly".to_owned()),
                Just("ReadWrite".to_owned()),
                text.prop_map(|s| s.to_owned())
            ]),
        )
            .prop_map(|(kind, namespace, claim_name, access_mode)| Grantee {
                kind,
                namespace,
                claim_name,
                access_mode,
            })
    }

    proptest! {
        /// Any grant at all: parsed without a panic, and an accepted one holds only valid names,
        /// no wildcard, no more entries than allowed, and lets in nothing it does not name.
        #[test]
        fn any_grant_is_either_refused_or_holds_only_valid_names(
            claim in "[a-z0-9*./-]{0,12}|\\PC{0,8}",
            to in proptest::collection::vec(any_grantee(), 0..70),
            probe_ns in "[a-z]{1,3}",
        ) {
            let spec = spec(&claim, to);
            if let Ok(rules) = parse(&spec) {
                prop_assert!(is_dns_subdomain(&rules.claim));
                prop_assert!(rules.to.len() <= MAX_GRANTEES);
                for allowed in &rules.to {
                    prop_assert!(is_dns_label(&allowed.namespace));
                    prop_assert!(allowed.claim.as_deref().is_none_or(is_dns_subdomain));
                }
                let named = rules.to.iter().any(|a| a.namespace == probe_ns);
                prop_assert_eq!(rules.mode_for(&claim, &probe_ns, "c").is_some(), named
                    && rules.to.iter().any(|a| a.namespace == probe_ns
                        && a.claim.as_deref().is_none_or(|c| c == "c")));
            } else {
                prop_assert!(!parse(&spec).unwrap_err().is_empty());
            }
        }

        /// Any `shareFrom` text: split only into a valid namespace and a valid claim name.
        #[test]
        fn any_share_from_splits_only_into_valid_names(text in "\\PC{0,40}|[a-z./-]{0,20}") {
            if let Some((namespace, claim)) = split_share_from(&text) {
                prop_assert!(is_dns_label(namespace) && is_dns_subdomain(claim));
                prop_assert_eq!(format!("{namespace}/{claim}"), text);
            }
        }
    }
}
