//! What a write changes in a bucket's usage, for whom, and the limits it is checked against:
//! the arithmetic the meters of `usage` keep, with no state of its own.

use serde::{Deserialize, Serialize};

/// Limits on what may be stored; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    /// Most objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_objects: Option<u64>,
    /// Most bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl Quota {
    /// Whether nothing is limited.
    pub fn is_unlimited(&self) -> bool {
        self.max_objects.is_none() && self.max_bytes.is_none()
    }
}

/// How many objects and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Objects.
    pub objects: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Usage {
    pub(super) fn apply(&mut self, delta: Delta) {
        self.objects = self.objects.saturating_add_signed(delta.objects);
        self.bytes = self.bytes.saturating_add_signed(delta.bytes);
    }

    pub(super) fn is_zero(&self) -> bool {
        self.objects == 0 && self.bytes == 0
    }
}

/// Who asks for a write: what is checked, and for whom what it adds is counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writer {
    /// The operator credential: never refused by a quota; counts for the bucket only.
    Operator,
    /// A claim's key, by the claim's user id.
    Claim(String),
}

impl Writer {
    /// The claim user its writes count for, if any.
    pub fn user(&self) -> Option<&str> {
        match self {
            Writer::Operator => None,
            Writer::Claim(user) => Some(user),
        }
    }
}

/// A signed change of objects and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Delta {
    pub objects: i64,
    pub bytes: i64,
}

impl Delta {
    /// Only what it adds: the part a write reserves and the quotas are checked against.
    pub(super) fn growth(self) -> Usage {
        Usage {
            objects: u64::try_from(self.objects).unwrap_or(0),
            bytes: u64::try_from(self.bytes).unwrap_or(0),
        }
    }
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// What an object now at a key takes, and who stored it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Existing {
    pub size: u64,
    pub writer: Option<String>,
}

/// A change of one bucket's usage, by writer (`None`: counted for the bucket only).
#[derive(Clone, Debug, Default)]
pub(super) struct Change {
    parts: Vec<(Option<String>, Delta)>,
}

impl Change {
    /// An object of `size` stored for `writer` in place of `old`.
    pub(super) fn store(writer: Option<&str>, size: u64, old: Option<&Existing>) -> Self {
        let mut change = Self::default();
        change.add(writer, Delta { objects: 1, bytes: signed(size) });
        if let Some(old) = old {
            change.add(old.writer.as_deref(), Delta { objects: -1, bytes: -signed(old.size) });
        }
        change
    }

    /// `old` removed.
    pub(super) fn remove(old: &Existing) -> Self {
        let mut change = Self::default();
        change.add(old.writer.as_deref(), Delta { objects: -1, bytes: -signed(old.size) });
        change
    }

    /// Bytes that count for `writer` but are no object (parts of an upload) going from `old`
    /// to `new`.
    pub(super) fn resize(writer: Option<&str>, new: u64, old: u64) -> Self {
        let mut change = Self::default();
        change.add(writer, Delta { objects: 0, bytes: signed(new) - signed(old) });
        change
    }

    /// Both changes at once.
    pub(super) fn and(mut self, other: Change) -> Self {
        for (writer, delta) in other.parts {
            self.add(writer.as_deref(), delta);
        }
        self
    }

    /// The growth part of the change: what a write reserves.
    pub(super) fn growth(&self) -> Change {
        let mut growth = Change::default();
        for (writer, delta) in self.by_writer() {
            let up = delta.growth();
            growth.add(writer, Delta { objects: signed(up.objects), bytes: signed(up.bytes) });
        }
        growth
    }

    /// The change that undoes this one.
    pub(super) fn reversed(&self) -> Change {
        let mut reversed = Change::default();
        for (writer, delta) in self.by_writer() {
            reversed.add(writer, Delta { objects: -delta.objects, bytes: -delta.bytes });
        }
        reversed
    }

    /// The change for each writer (`None`: the bucket only).
    pub(super) fn by_writer(&self) -> impl Iterator<Item = (Option<&str>, Delta)> {
        self.parts.iter().map(|(writer, delta)| (writer.as_deref(), *delta))
    }

    fn add(&mut self, writer: Option<&str>, delta: Delta) {
        match self.parts.iter_mut().find(|(w, _)| w.as_deref() == writer) {
            Some((_, d)) => {
                d.objects += delta.objects;
                d.bytes += delta.bytes;
            }
            None => self.parts.push((writer.map(str::to_owned), delta)),
        }
    }

    /// The change of the bucket's total.
    pub(super) fn total(&self) -> Delta {
        self.parts.iter().fold(Delta::default(), |sum, (_, d)| Delta {
            objects: sum.objects + d.objects,
            bytes: sum.bytes + d.bytes,
        })
    }
}
