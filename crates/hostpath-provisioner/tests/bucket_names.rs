//! The bucket provisioner and the endpoint check bucket names by rules of their own; a claim's
//! name is only worth accepting if the endpoint accepts it too, and a name the endpoint refuses
//! must be refused at the claim with the same reason.

use bucket_provisioner::bucket::naming::validate_bucket_name as claim_rule;
use s3_endpoint::store::validate_bucket_name as endpoint_rule;

/// Any text, text of the allowed characters, and names near the reserved prefixes and suffixes.
const NAMES: &str = concat!(
    "\\PC{0,70}|[a-z0-9.-]{0,70}",
    "|(xn--|sthree-|amzn-s3-demo-)?[0-9a-z.-]{1,12}(-s3alias|--ol-s3|--x-s3|--table-s3|\\.mrap)?",
);

proptest::proptest! {
    #[test]
    fn claims_and_the_endpoint_agree_on_every_name(name in NAMES) {
        let claim = claim_rule(&name);
        let endpoint = endpoint_rule(&name).map_err(|e| e.to_string());
        proptest::prop_assert_eq!(claim, endpoint);
    }
}

#[test]
fn claims_and_the_endpoint_agree_on_each_rule() {
    let names = [
        "abc",
        "ab",
        "Abc",
        "-ab",
        "ab-",
        "a..b",
        "1.2.3.4",
        "1.2.3",
        "xn--a",
        "sthree-a",
        "amzn-s3-demo-a",
        "a-s3alias",
        "a--ol-s3",
        "a--x-s3",
        "a--table-s3",
        "a.mrap",
    ];
    for name in names.iter().copied().chain([&*"a".repeat(63), &*"a".repeat(64)]) {
        assert_eq!(claim_rule(name), endpoint_rule(name).map_err(|e| e.to_string()), "{name}");
    }
}
