//! `additionalConfig` key `versioning`: `Enabled` or `Suspended`, as S3's
//! `PutBucketVersioning` takes them. A bucket once versioned can only be suspended, never made
//! unversioned again, so a claim dropping the key suspends it.

use provisioner_runtime::BackendError;

/// The `additionalConfig` key.
pub const VERSIONING: &str = "versioning";

/// The versioning state a claim asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Versioning {
    /// Every write keeps the previous version.
    Enabled,
    /// New writes replace; versions already kept stay.
    Suspended,
}

impl Versioning {
    /// Reads the claim's value; anything but `Enabled` or `Suspended` is refused by name.
    pub fn parse(text: &str) -> Result<Self, BackendError> {
        match text.trim() {
            "Enabled" => Ok(Self::Enabled),
            "Suspended" => Ok(Self::Suspended),
            other => Err(BackendError::invalid_parameter(format!(
                "additionalConfig {VERSIONING}: {other:?} is neither \"Enabled\" nor \"Suspended\""
            ))),
        }
    }

    /// The value as S3 writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "Enabled",
            Self::Suspended => "Suspended",
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_two_states_and_nothing_else() {
        assert_eq!(Versioning::parse("Enabled").unwrap(), Versioning::Enabled);
        assert_eq!(Versioning::parse(" Suspended\n").unwrap().as_str(), "Suspended");
        for bad in ["enabled", "true", "", "Disabled"] {
            let error = Versioning::parse(bad).unwrap_err().to_string();
            assert!(error.starts_with("additionalConfig versioning: "), "{error}");
        }
    }

    proptest! {
        /// Any text is judged: accepted only as one of the two states, else a permanent error.
        #[test]
        fn any_text_is_judged(text in prop_oneof![any::<String>(), "(Enabled|Suspended| )+"]) {
            match Versioning::parse(&text) {
                Ok(state) => prop_assert_eq!(state.as_str(), text.trim()),
                Err(error) => prop_assert!(error.is_permanent()),
            }
        }
    }
}
