//! Loop images are sparse: each takes room on the root's filesystem only as its volume is
//! written. What they may still take, together, can be more than the root has free; then a
//! volume can fail with `ENOSPC` before it is full, whatever its capacity says. Nothing is
//! refused for it (operators overcommit on purpose), but it is said where the claim's owner and
//! the operator look: the `ProvisioningSucceeded` Event and the log.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::loopback::IMAGES;

/// How much the loop images under a root may still grow, and what the root has free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overcommit {
    /// Bytes the images may still take: their sizes less what they hold already.
    pub promised: u64,
    /// Bytes free on the root's filesystem, for an unprivileged writer.
    pub free: u64,
}

impl Overcommit {
    /// Reads the images under `root` (each file's size and allocated blocks) and the free space
    /// of `root`'s filesystem.
    pub fn of(root: &Path) -> std::io::Result<Self> {
        let mut images = Vec::new();
        for entry in std::fs::read_dir(root.join(IMAGES))? {
            let meta = entry?.metadata()?;
            if meta.is_file() {
                images.push((meta.len(), meta.blocks().saturating_mul(512)));
            }
        }
        let stat = rustix::fs::statvfs(root).map_err(std::io::Error::from)?;
        let free = stat.f_bavail.saturating_mul(stat.f_frsize);
        Ok(Self { promised: still_to_take(&images), free })
    }

    /// What the images may take past the free space; `None` when it all fits.
    pub fn shortfall(&self) -> Option<u64> {
        self.promised.checked_sub(self.free).filter(|short| *short > 0)
    }

    /// The sentence for the Event and the log, when the images overcommit the root.
    pub fn warning(&self) -> Option<String> {
        let short = self.shortfall()?;
        Some(format!(
            "the node's loop images may still grow by {} MiB but their filesystem has {} MiB \
             free ({} MiB overcommitted): a volume may fail with ENOSPC before it is full",
            self.promised / MIB,
            self.free / MIB,
            short.div_ceil(MIB)
        ))
    }
}

const MIB: u64 = 1024 * 1024;

/// What images of (size, allocated bytes) may still take.
fn still_to_take(images: &[(u64, u64)]) -> u64 {
    images
        .iter()
        .fold(0, |sum, (size, allocated)| sum.saturating_add(size.saturating_sub(*allocated)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_what_images_may_still_take_counts_and_only_past_the_free_space_warns() {
        assert_eq!(still_to_take(&[(100, 40), (50, 50), (10, 20)]), 60);
        let fits = Overcommit { promised: 60, free: 60 };
        assert_eq!((fits.shortfall(), fits.warning()), (None, None));
        let over = Overcommit { promised: 300 * MIB, free: 100 * MIB };
        assert_eq!(over.shortfall(), Some(200 * MIB));
        let warning = over.warning().unwrap();
        assert!(warning.contains("300 MiB") && warning.contains("100 MiB free"), "{warning}");
        assert!(warning.contains("200 MiB overcommitted"), "{warning}");
    }

    proptest! {
        /// Any sizes, however large, give an answer (never an overflow), and a warning exactly
        /// when the images may take more than is free.
        #[test]
        fn any_sizes_are_answered_and_warn_exactly_past_the_free_space(
            images in prop::collection::vec((any::<u64>(), any::<u64>()), 0..8),
            free in any::<u64>(),
        ) {
            let promised = still_to_take(&images);
            let exact: u128 = images.iter().map(|(s, a)| u128::from(s.saturating_sub(*a))).sum();
            prop_assert_eq!(u128::from(promised), exact.min(u128::from(u64::MAX)));
            let overcommit = Overcommit { promised, free };
            prop_assert_eq!(overcommit.warning().is_some(), promised > free);
        }
    }
}
