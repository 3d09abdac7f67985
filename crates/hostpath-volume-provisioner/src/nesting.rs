//! Subvolumes a pod makes inside its btrfs volume, counted against the volume's capacity.
//!
//! Any user may run `btrfs subvolume create` in a directory it can write. The new subvolume gets
//! a quota group of its own, `0/<new id>`, in no other group: its bytes count against no limit.
//! So a volume's limit is on a group one level up, `1/<volume id>` ([`btrfs::volume_group`]),
//! and every subvolume inside the volume, at any depth, is made a member of it.
//!
//! Nothing makes that happen when the subvolume is made. The kernel's full quota accounting
//! (what `btrfs quota enable` turns on) never puts a new subvolume in its parent's groups: only
//! the creator can ask for that (`btrfs subvolume create -i`), and a pod does not; simple quotas
//! (kernel 6.7 and btrfs-progs 6.7 on, a different accounting) would, but neither Debian 12's
//! tools nor existing filesystems have them. Nor can a pod be kept from making subvolumes: no
//! mount option or permission forbids it. So [`sweep`] finds them, from one listing of the
//! filesystem's subvolumes with the subvolume each sits in (no walk through the tenant's
//! files), and adds each to its volume's group: every `--nested-subvolume-sweep-seconds`, before
//! each usage reading, and before a volume is deleted. A new subvolume is empty, so the kernel
//! adds it without a rescan; a snapshot shares its bytes and btrfs-progs rescans. Until the
//! sweep after its creation, a pod can write past its capacity only into a subvolume made since
//! the last sweep: a volume's bytes exceed its capacity by at most what the pod wrote into such
//! subvolumes during that interval, and from the sweep on, nothing more goes in.
//!
//! Volumes made before volume groups had their limit on `0/<id>`: [`migrate`], at start, makes
//! their group, puts the volume in it, moves the limit up and lifts the old one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::backing_kind::Backing;
use crate::btrfs::{self, QgroupId, QuotaGroup, Subvolume};
use crate::store::{Record, VolumeStore};
use crate::tools::ToolError;

/// Every subvolume inside the subvolume `top`, at any depth, from a listing of the filesystem.
pub fn descendants(subvolumes: &[Subvolume], top: u64) -> BTreeSet<u64> {
    let mut children: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for s in subvolumes {
        children.entry(s.parent).or_default().push(s.id);
    }
    let mut found = BTreeSet::new();
    let mut next = vec![top];
    while let Some(id) = next.pop() {
        for child in children.get(&id).into_iter().flatten() {
            // (A listing never holds a circle; a garbled one is not followed round it.)
            if *child != top && found.insert(*child) {
                next.push(*child);
            }
        }
    }
    found
}

/// The subvolumes inside volume `id` whose groups are not yet members of its volume group.
pub fn unswept(subvolumes: &[Subvolume], groups: &[QuotaGroup], id: u64) -> Vec<u64> {
    let family = btrfs::volume_group(id);
    let inside: BTreeSet<u64> = groups
        .iter()
        .filter(|g| g.level == 0 && g.parents.contains(&family))
        .map(|g| g.id)
        .collect();
    descendants(subvolumes, id).into_iter().filter(|d| !inside.contains(d)).collect()
}

/// Adds every subvolume inside volume `id` to its volume group; answers how many were added.
/// A volume without a group (one made before groups whose migration failed) is left as it is.
pub fn enclose(root: &std::path::Path, id: u64) -> Result<usize, ToolError> {
    let (subvolumes, groups) = (btrfs::subvolumes(root)?, btrfs::qgroups(root)?);
    if !groups.iter().any(|g| g.qgroup() == btrfs::volume_group(id)) {
        return Ok(0);
    }
    add(root, id, &unswept(&subvolumes, &groups, id))
}

fn add(root: &std::path::Path, id: u64, nested: &[u64]) -> Result<usize, ToolError> {
    for inner in nested {
        btrfs::assign(root, QgroupId::subvolume(*inner), btrfs::volume_group(id))?;
        tracing::info!(
            volume_subvolume = id,
            nested = inner,
            "a subvolume made inside a volume now counts against the volume's capacity"
        );
    }
    Ok(nested.len())
}

/// The subvolume ids of this identity's volumes held by quota groups.
fn limited(store: &VolumeStore) -> Vec<(String, Record, u64)> {
    store
        .records()
        .into_iter()
        .filter(|(_, r)| r.identity == store.identity())
        .filter_map(|(volume, r)| match r.backing {
            Backing::Subvolume { id: Some(id), limited: true } => Some((volume, r, id)),
            _ => None,
        })
        .collect()
}

/// Adds every subvolume made inside a volume of `store` to the volume's group; answers how many
/// were added. Volumes whose group is not made yet (being made, or deleted) are left to that.
pub fn sweep(store: &VolumeStore) -> Result<usize, ToolError> {
    let volumes = limited(store);
    if volumes.is_empty() {
        return Ok(0);
    }
    let root = store.root();
    let subvolumes = btrfs::subvolumes(root)?;
    let ids: BTreeSet<u64> = volumes.iter().map(|(.., id)| *id).collect();
    if !subvolumes.iter().any(|s| ids.contains(&s.parent)) {
        // Nothing is nested in any volume (the usual case): one listing was all.
        return Ok(0);
    }
    let groups = btrfs::qgroups(root)?;
    let mut added = 0;
    for id in ids {
        if !groups.iter().any(|g| g.qgroup() == btrfs::volume_group(id)) {
            continue;
        }
        match add(root, id, &unswept(&subvolumes, &groups, id)) {
            Ok(n) => added += n,
            // One volume (a subvolume deleted meanwhile, say) does not hold up the others.
            Err(e) => tracing::warn!(volume_subvolume = id, error = %e,
                "adding subvolumes made inside a volume to its quota group"),
        }
    }
    Ok(added)
}

/// Sweeps `store` every `interval`, forever. A failure is logged when it first happens, not
/// every second while it lasts.
pub async fn sweep_every(store: Arc<VolumeStore>, interval: Duration) {
    let mut failing: Option<String> = None;
    loop {
        let from = store.clone();
        let failure = match tokio::task::spawn_blocking(move || sweep(&from)).await {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(error) = &failure
            && failing.as_ref() != Some(error)
        {
            tracing::warn!(error = %error, "sweeping for nested subvolumes");
        }
        failing = failure;
        tokio::time::sleep(interval).await;
    }
}

/// Gives every volume of `store` held by a quota group its volume group, with the limit on it,
/// as volumes made before volume groups lack; then sweeps. Answers how many volumes changed. A
/// volume that cannot be migrated is logged (as an error) and skipped.
pub fn migrate(store: &VolumeStore) -> usize {
    let volumes = limited(store);
    if volumes.is_empty() {
        return 0;
    }
    let root = store.root();
    let groups = match btrfs::qgroups(root) {
        Ok(groups) => groups,
        Err(e) => {
            tracing::error!(error = %e, "listing quota groups: no volume migrated");
            return 0;
        }
    };
    let mut migrated = 0;
    for (volume, record, id) in volumes {
        match migrate_one(root, &groups, &record, id) {
            Ok(true) => {
                migrated += 1;
                tracing::info!(volume = %volume, "the volume's limit is now on its volume group");
            }
            Ok(false) => {}
            Err(e) => tracing::error!(volume = %volume, error = %e,
                "the volume could not be given a volume group; its capacity holds as before, \
                 but not across subvolumes made inside it"),
        }
    }
    if let Err(e) = sweep(store) {
        tracing::warn!(error = %e, "sweeping for nested subvolumes");
    }
    migrated
}

/// Migrates one volume, in an order where a stop at any step is finished by the next start:
/// group, membership, limit on the group, old limit lifted. Answers whether anything changed.
fn migrate_one(
    root: &std::path::Path,
    groups: &[QuotaGroup],
    record: &Record,
    id: u64,
) -> Result<bool, ToolError> {
    let find = |wanted: QgroupId| groups.iter().find(|g| g.qgroup() == wanted);
    let (own, family) = (QgroupId::subvolume(id), btrfs::volume_group(id));
    let Some(own_group) = find(own) else {
        // No subvolume (a volume half made or half deleted): its retry sees to it.
        return Ok(false);
    };
    let grouped = own_group.parents.contains(&family);
    let capacity = record.capacity.or(own_group.limit);
    let limit_there = find(family).is_some_and(|g| g.limit == capacity);
    if grouped && limit_there && own_group.limit.is_none() {
        return Ok(false);
    }
    btrfs::make_volume_group(root, id)?;
    if !limit_there {
        btrfs::set_limit(root, family, capacity)?;
    }
    if own_group.limit.is_some() {
        btrfs::set_limit(root, own, None)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A tree of subvolumes: each after the first few sits in an earlier one or in the top
    /// level (5).
    fn tree() -> impl Strategy<Value = Vec<Subvolume>> {
        proptest::collection::vec(any::<prop::sample::Index>(), 0..40).prop_map(|picks| {
            let mut listed: Vec<Subvolume> = Vec::new();
            for (i, pick) in picks.iter().enumerate() {
                let id = 256 + i as u64;
                let parent = if listed.is_empty() || pick.index(4) == 0 {
                    5
                } else {
                    listed[pick.index(listed.len())].id
                };
                listed.push(Subvolume { id, parent });
            }
            listed
        })
    }

    /// Walks up from `id` to the top level: whether `top` is on the way.
    fn inside(listed: &[Subvolume], mut id: u64, top: u64) -> bool {
        while let Some(s) = listed.iter().find(|s| s.id == id) {
            if s.parent == top {
                return true;
            }
            id = s.parent;
        }
        false
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Exactly the subvolumes whose chain of parents reaches a volume are inside it.
        #[test]
        fn descendants_are_those_whose_parents_reach_the_volume(
            listed in tree(), pick in any::<prop::sample::Index>()
        ) {
            let top = listed.get(pick.index(listed.len().max(1))).map_or(5, |s| s.id);
            let found = descendants(&listed, top);
            for s in &listed {
                prop_assert_eq!(found.contains(&s.id), inside(&listed, s.id, top), "{}", s.id);
            }
        }

        /// Those already in the volume's group are not added again; all others inside are.
        #[test]
        fn only_subvolumes_outside_the_group_are_swept(
            listed in tree(), pick in any::<prop::sample::Index>(), member in any::<Vec<bool>>()
        ) {
            let top = listed.get(pick.index(listed.len().max(1))).map_or(5, |s| s.id);
            let family = btrfs::volume_group(top);
            let groups: Vec<QuotaGroup> = listed.iter().enumerate().map(|(i, s)| QuotaGroup {
                level: 0, id: s.id, referenced: 0, limit: None,
                parents: if member.get(i).copied().unwrap_or(false) { vec![family] } else { vec![] },
            }).collect();
            let swept = unswept(&listed, &groups, top);
            for s in &listed {
                let grouped = groups.iter().any(|g| g.id == s.id && g.parents.contains(&family));
                let expected = inside(&listed, s.id, top) && !grouped;
                prop_assert_eq!(swept.contains(&s.id), expected);
            }
        }
    }
}
