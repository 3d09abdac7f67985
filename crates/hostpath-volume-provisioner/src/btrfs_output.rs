//! What the `btrfs` program prints, read: quota groups (`btrfs qgroup show`) with their levels,
//! limits and parents, and the subvolumes of a filesystem with the subvolume each sits in
//! (`btrfs subvolume list -p`).

use std::fmt;

/// The largest subvolume number a quota group id holds (its low 48 bits; the level is above).
pub const MAX_QGROUP_NUMBER: u64 = (1 << 48) - 1;

/// A quota group id, `<level>/<number>`: `0/<subvolume id>` is a subvolume's own group, which
/// the kernel makes; higher levels are groups of groups, which only an administrator makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QgroupId {
    /// 0 for a subvolume's own group.
    pub level: u16,
    /// The subvolume id at level 0; any number at higher levels.
    pub id: u64,
}

impl QgroupId {
    /// The level-0 group of subvolume `id`.
    pub fn subvolume(id: u64) -> Self {
        Self { level: 0, id }
    }

    /// Reads `<level>/<number>`.
    pub fn parse(text: &str) -> Option<Self> {
        let (level, id) = text.split_once('/')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(level) || !digits(id) {
            return None;
        }
        let id = id.parse().ok().filter(|id| *id <= MAX_QGROUP_NUMBER)?;
        Some(Self { level: level.parse().ok()?, id })
    }
}

impl fmt::Display for QgroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.level, self.id)
    }
}

/// One quota group as `btrfs qgroup show --raw -r [-p]` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaGroup {
    /// Its level (0: a subvolume's own group).
    pub level: u16,
    /// The number after the level (the subvolume id at level 0).
    pub id: u64,
    /// Bytes referenced (an extent shared by members of a higher-level group counts once).
    pub referenced: u64,
    /// The limit on referenced bytes, if any.
    pub limit: Option<u64>,
    /// The groups it is a member of (empty unless listed with `-p`).
    pub parents: Vec<QgroupId>,
}

impl QuotaGroup {
    /// Its id.
    pub fn qgroup(&self) -> QgroupId {
        QgroupId { level: self.level, id: self.id }
    }
}

/// A column of `btrfs qgroup show`, in the order btrfs-progs prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Id,
    Referenced,
    Exclusive,
    MaxReferenced,
    MaxExclusive,
    Parent,
    Child,
    Path,
}

/// The columns a header line names, or `None` if it is no header.
fn columns(header: &str) -> Option<Vec<Column>> {
    let words: Vec<&str> = header.split_whitespace().collect();
    if words.first() != Some(&"Qgroupid") {
        return None;
    }
    let mut found = vec![Column::Id];
    let mut i = 1;
    while i < words.len() {
        let column = match (words[i], words.get(i + 1).copied()) {
            ("Max", Some("referenced")) => Column::MaxReferenced,
            ("Max", Some("exclusive")) => Column::MaxExclusive,
            ("Referenced", _) => Column::Referenced,
            ("Exclusive", _) => Column::Exclusive,
            ("Parent", _) => Column::Parent,
            ("Child", _) => Column::Child,
            ("Path", _) => Column::Path,
            _ => return None,
        };
        i += if matches!(column, Column::MaxReferenced | Column::MaxExclusive) { 2 } else { 1 };
        found.push(column);
    }
    Some(found)
}

/// Parses `btrfs qgroup show --raw` output with `-r` (and any of `-e`, `-p`, `-c`), reading
/// the columns from its header: the path comes last and may hold spaces or look like an id, so
/// only the header tells a parent column from a path. Lines before a header are ignored, as is
/// every group missing its id, referenced bytes or limit.
pub fn parse_qgroups(text: &str) -> Vec<QuotaGroup> {
    let mut layout: Option<Vec<Column>> = None;
    let mut groups = Vec::new();
    for line in text.lines() {
        if let Some(found) = columns(line) {
            layout = Some(found);
            continue;
        }
        let Some(layout) = &layout else { continue };
        if let Some(group) = parse_row(line, layout) {
            groups.push(group);
        }
    }
    groups
}

fn parse_row(line: &str, layout: &[Column]) -> Option<QuotaGroup> {
    let mut fields = line.split_whitespace();
    let (mut id, mut referenced, mut limit, mut parents) = (None, None, None, Vec::new());
    for column in layout {
        if *column == Column::Path {
            break;
        }
        let field = fields.next()?;
        match column {
            Column::Id => id = Some(QgroupId::parse(field)?),
            Column::Referenced => referenced = Some(field.parse::<u64>().ok()?),
            Column::MaxReferenced => {
                limit = Some(if field == "none" { None } else { Some(field.parse().ok()?) });
            }
            Column::Parent if field != "-" => {
                parents = field.split(',').map(QgroupId::parse).collect::<Option<_>>()?;
            }
            _ => {}
        }
    }
    let id = id?;
    Some(QuotaGroup { level: id.level, id: id.id, referenced: referenced?, limit: limit?, parents })
}

/// One subvolume as `btrfs subvolume list -p` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subvolume {
    /// Its id.
    pub id: u64,
    /// The id of the subvolume its directory entry is in.
    pub parent: u64,
}

/// Parses `btrfs subvolume list -p` output (`ID 257 gen 13 parent 256 top level 256 path a/b`):
/// the words before `path` are pairs of a name and a number; the path, last, is not read.
pub fn parse_subvolumes(text: &str) -> Vec<Subvolume> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let end = words.iter().position(|w| *w == "path").unwrap_or(words.len());
            let number = |name: &str| {
                let at = words[..end].iter().position(|w| *w == name)?;
                words.get(at + 1).filter(|_| at + 1 < end)?.parse::<u64>().ok()
            };
            Some(Subvolume { id: number("ID")?, parent: number("parent")? })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn quota_groups_of_both_levels_are_read_with_their_parents() {
        let text = "\
Qgroupid    Referenced    Exclusive  Max referenced Parent   Child         Path 
--------    ----------    ---------  -------------- ------   -----         ---- 
0/5              16384        16384            none -        -             <toplevel>
0/256            16384        16384            none 1/256    -             vol
0/257        104873984    104873984            none 1/256,2/7 -            vol/x
1/256        104890368    104890368        67108864 -        0/256,0/257   <0 member qgroups>
";
        let parsed = parse_qgroups(text);
        let one = QgroupId { level: 1, id: 256 };
        assert_eq!(parsed.len(), 4);
        assert_eq!(parsed[1].parents, [one]);
        assert_eq!(parsed[2].parents, [one, QgroupId { level: 2, id: 7 }]);
        assert_eq!(
            parsed[3],
            QuotaGroup {
                level: 1,
                id: 256,
                referenced: 104890368,
                limit: Some(67108864),
                parents: vec![]
            }
        );
    }

    #[test]
    fn a_path_that_looks_like_an_id_is_no_parent() {
        let text = "\
Qgroupid    Referenced    Exclusive  Max referenced   Path 
--------    ----------    ---------  --------------   ---- 
0/256         20955136     20955136        20971520   1/256
";
        assert_eq!(parse_qgroups(text)[0].parents, []);
    }

    #[test]
    fn subvolumes_are_read_with_the_subvolume_they_sit_in() {
        let text = "\
ID 256 gen 10 parent 5 top level 5 path vol
ID 258 gen 15 parent 257 top level 257 path vol/x/path parent 9
";
        assert_eq!(
            parse_subvolumes(text),
            [Subvolume { id: 256, parent: 5 }, Subvolume { id: 258, parent: 257 }]
        );
    }

    fn qgroup_id() -> impl Strategy<Value = QgroupId> {
        (0u16..4, prop_oneof![0..2000u64, Just(MAX_QGROUP_NUMBER)])
            .prop_map(|(level, id)| QgroupId { level, id })
    }

    fn group() -> impl Strategy<Value = (QuotaGroup, u64, Vec<QgroupId>, String)> {
        (
            qgroup_id(),
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(qgroup_id(), 0..3),
            proptest::collection::vec(qgroup_id(), 0..3),
            "(<toplevel>|<0 member qgroups>|[a-z0-9/ ._-]{0,20}|[0-9]/[0-9]{1,4})",
        )
            .prop_map(|(id, referenced, exclusive, limit, parents, children, path)| {
                let group = QuotaGroup { level: id.level, id: id.id, referenced, limit, parents };
                (group, exclusive, children, path)
            })
    }

    fn listed(ids: &[QgroupId]) -> String {
        if ids.is_empty() {
            return "-".into();
        }
        ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever groups btrfs-progs prints, with whichever of the optional columns, each is
        /// read back as it was, parents included only where a Parent column says so.
        #[test]
        fn printed_quota_groups_are_read_back(
            groups in proptest::collection::vec(group(), 0..6),
            exclusive_limit in any::<bool>(),
            with_parents in any::<bool>(),
            with_children in any::<bool>(),
            pad in 1usize..6,
        ) {
            let gap = " ".repeat(pad);
            let mut header = vec!["Qgroupid", "Referenced", "Exclusive", "Max referenced"];
            if exclusive_limit { header.push("Max exclusive"); }
            if with_parents { header.push("Parent"); }
            if with_children { header.push("Child"); }
            header.push("Path");
            let mut text = format!("{}\n{}\n", header.join(&gap), "-------- ".repeat(header.len()));
            for (group, exclusive, children, path) in &groups {
                let limit = group.limit.map_or("none".to_owned(), |l| l.to_string());
                let mut row = vec![
                    group.qgroup().to_string(), group.referenced.to_string(),
                    exclusive.to_string(), limit,
                ];
                if exclusive_limit { row.push("none".into()); }
                if with_parents { row.push(listed(&group.parents)); }
                if with_children { row.push(listed(children)); }
                row.push(path.clone());
                text.push_str(&row.join(&gap));
                text.push('\n');
            }
            let expected: Vec<QuotaGroup> = groups.iter().map(|(g, ..)| QuotaGroup {
                parents: if with_parents { g.parents.clone() } else { vec![] },
                ..g.clone()
            }).collect();
            prop_assert_eq!(parse_qgroups(&text), expected);
        }

        /// Any text at all is read without a panic, and every id read is one btrfs could hold.
        #[test]
        fn any_text_is_read_without_a_panic(text in any::<String>(), header in any::<bool>()) {
            let text = if header {
                format!("Qgroupid Referenced Exclusive Max referenced Parent Path\n{text}")
            } else { text };
            for group in parse_qgroups(&text) {
                prop_assert!(group.id <= MAX_QGROUP_NUMBER);
                prop_assert!(group.parents.iter().all(|p| p.id <= MAX_QGROUP_NUMBER));
            }
            let _ = parse_subvolumes(&text);
        }

        /// An id reads back from its printed form, and nothing else reads as one.
        #[test]
        fn ids_read_back(id in qgroup_id(), junk in "[0-9/ a+-]{0,8}") {
            prop_assert_eq!(QgroupId::parse(&id.to_string()), Some(id));
            if let Some(read) = QgroupId::parse(&junk) {
                prop_assert_eq!(junk.matches('/').count(), 1);
                prop_assert_eq!(QgroupId::parse(&read.to_string()), Some(read));
            }
        }

        /// Every listed subvolume is read with its parent, whatever its path.
        #[test]
        fn listed_subvolumes_are_read_back(
            subvolumes in proptest::collection::vec(
                (any::<u64>(), any::<u64>(), any::<u64>(), "[a-z0-9/ ]{0,20}"), 0..6),
        ) {
            let text: String = subvolumes.iter().map(|(id, gen_, parent, path)| {
                format!("ID {id} gen {gen_} parent {parent} top level {parent} path {path}\n")
            }).collect();
            let expected: Vec<Subvolume> =
                subvolumes.iter().map(|(id, _, parent, _)| Subvolume { id: *id, parent: *parent })
                    .collect();
            prop_assert_eq!(parse_subvolumes(&text), expected);
        }
    }
}
