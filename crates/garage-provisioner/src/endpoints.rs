//! The admin endpoints of one Garage cluster, as the `adminEndpoint` parameter lists them: one
//! URL, or several separated by commas (any node's admin API serves the whole cluster, so a
//! class naming several nodes keeps working while one of them is down).

use std::fmt;

use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::remote::ServiceUrl;

/// URL of Garage's admin API (its `[admin] api_bind_addr`), e.g. `http://garage:3903`, or the
/// URLs of several nodes' admin APIs separated by commas (see [`AdminEndpoints`]).
pub const ADMIN_ENDPOINT: &str = "adminEndpoint";

/// The most admin endpoints one StorageClass may name.
pub const MAX_ADMIN_ENDPOINTS: usize = 16;

/// One or more admin API URLs of the same Garage cluster, in the order given, without repeats.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AdminEndpoints(Vec<ServiceUrl>);

impl AdminEndpoints {
    /// Parses `value`: URLs separated by commas, blanks around each ignored. An empty entry,
    /// more than [`MAX_ADMIN_ENDPOINTS`] entries or any entry [`ServiceUrl::parse`] refuses is
    /// an error naming the parameter; a repeated URL counts once.
    pub fn parse(value: &str) -> Result<Self, BackendError> {
        let example = "http://garage:3903 or http://garage-0:3903,http://garage-1:3903";
        let entries: Vec<&str> = value.split(',').map(str::trim).collect();
        if entries.len() > MAX_ADMIN_ENDPOINTS {
            return Err(BackendError::invalid_parameter(format!(
                "parameter {ADMIN_ENDPOINT} names {} URLs; at most {MAX_ADMIN_ENDPOINTS} are \
                 accepted",
                entries.len()
            )));
        }
        let mut urls: Vec<ServiceUrl> = Vec::with_capacity(entries.len());
        for entry in entries {
            if entry.is_empty() {
                return Err(BackendError::invalid_parameter(format!(
                    "parameter {ADMIN_ENDPOINT} {value:?} has an empty entry; expected URLs \
                     separated by commas, such as {example}"
                )));
            }
            let url = ServiceUrl::parse(ADMIN_ENDPOINT, entry, example)?;
            if !urls.contains(&url) {
                urls.push(url);
            }
        }
        Ok(Self(urls))
    }

    /// The endpoints, in the order given (never empty).
    pub fn urls(&self) -> &[ServiceUrl] {
        &self.0
    }

    /// A single endpoint.
    pub fn one(url: ServiceUrl) -> Self {
        Self(vec![url])
    }
}

/// `scheme://host:port` of each, separated by commas: what [`AdminEndpoints::parse`] reads back.
impl fmt::Display for AdminEndpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.0.iter().map(ServiceUrl::url).collect();
        f.write_str(&urls.join(","))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn one_or_several_urls_in_order_without_repeats() {
        let one = AdminEndpoints::parse("http://garage:3903").unwrap();
        assert_eq!(one.to_string(), "http://garage:3903");
        let several =
            AdminEndpoints::parse(" http://a:3903 ,https://b, http://a:3903,http://c:1").unwrap();
        assert_eq!(several.to_string(), "http://a:3903,https://b:443,http://c:1");
        assert_eq!(AdminEndpoints::parse(&several.to_string()).unwrap(), several);
    }

    #[test]
    fn empty_entries_bad_urls_and_too_many_are_refused() {
        for (bad, why) in [
            ("", "empty entry"),
            ("http://a:3903,", "empty entry"),
            ("http://a:3903,,http://b:3903", "empty entry"),
            ("http://a:3903,garage:3903", "must start with"),
            ("http://a:3903,http://token@b:3903", "user information"),
        ] {
            let error = AdminEndpoints::parse(bad).unwrap_err();
            assert!(error.is_permanent(), "{bad:?}");
            assert!(error.to_string().contains(why), "{bad:?}: {error}");
            assert!(error.to_string().contains(ADMIN_ENDPOINT), "{bad:?}: {error}");
        }
        let many: Vec<String> =
            (0..=MAX_ADMIN_ENDPOINTS).map(|i| format!("http://n{i}:3903")).collect();
        let error = AdminEndpoints::parse(&many.join(",")).unwrap_err();
        assert!(error.to_string().contains("at most"), "{error}");
    }

    proptest! {
        #[test]
        fn any_text_is_parsed_or_refused_without_panic(value in any::<String>()) {
            let _ = AdminEndpoints::parse(&value);
        }

        #[test]
        fn lists_of_urls_read_the_same_however_spaced_and_read_back(
            hosts in proptest::collection::vec("[a-z][a-z0-9-]{0,10}", 1..6),
            ports in proptest::collection::vec(1u16.., 6),
            blanks in proptest::collection::vec(" {0,2}", 12),
        ) {
            let urls: Vec<String> = hosts
                .iter()
                .zip(&ports)
                .map(|(host, port)| format!("http://{host}:{port}"))
                .collect();
            let plain = AdminEndpoints::parse(&urls.join(",")).unwrap();
            let spaced: Vec<String> = urls
                .iter()
                .enumerate()
                .map(|(i, url)| format!("{}{url}{}", blanks[2 * i], blanks[2 * i + 1]))
                .collect();
            prop_assert_eq!(&AdminEndpoints::parse(&spaced.join(",")).unwrap(), &plain);
            prop_assert_eq!(&AdminEndpoints::parse(&plain.to_string()).unwrap(), &plain);
            prop_assert!(plain.urls().len() <= urls.len() && !plain.urls().is_empty());
        }

        #[test]
        fn mixed_lists_never_panic_and_a_good_list_stays_good(
            parts in proptest::collection::vec(
                prop_oneof!["http://[a-z]{1,5}:[0-9]{1,5}", ".{0,12}"], 1..5),
        ) {
            let joined = parts.join(",");
            if let Ok(parsed) = AdminEndpoints::parse(&joined) {
                prop_assert_eq!(AdminEndpoints::parse(&parsed.to_string()).unwrap(), parsed);
            }
        }
    }
}
