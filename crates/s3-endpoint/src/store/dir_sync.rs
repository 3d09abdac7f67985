//! Syncs of a directory shared by the writes that need one at the same moment (group commit).
//!
//! A PUT renames its file into place and then syncs the directory, so that the name lasts
//! before the answer. A sync started after a rename covers it, whoever started it: writes
//! renamed into a directory while a sync of it runs wait for the next one, which serves them
//! all. Sixteen concurrent PUTs into one directory then pay for a few directory syncs instead
//! of sixteen, and none is answered before a sync that began after its rename has succeeded.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The syncs of one directory. Tickets are numbered in the order writes ask.
#[derive(Default)]
struct Dir {
    /// The last ticket handed out.
    asked: u64,
    /// Every ticket up to this one is covered by a sync that succeeded.
    synced: u64,
    /// Every ticket up to this one was covered by a sync that failed.
    failed: u64,
    /// Whether a sync of the directory is under way.
    running: bool,
    /// Tickets not yet answered; the entry goes when none is left.
    waiting: usize,
}

/// The directory syncs under way in a store.
#[derive(Default)]
pub(super) struct DirSyncs {
    dirs: Mutex<HashMap<PathBuf, Dir>>,
    finished: Condvar,
}

impl DirSyncs {
    /// Returns once `fsync(dir)`, started after this call began, has succeeded: whatever was
    /// renamed into `dir` before the call lasts. Fails if that sync failed. Blocking.
    pub(super) fn sync(
        &self,
        dir: &Path,
        fsync: impl Fn(&Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut dirs = self.lock();
        let ticket = {
            let entry = dirs.entry(dir.to_owned()).or_default();
            entry.asked += 1;
            entry.waiting += 1;
            entry.asked
        };
        let result = loop {
            let entry = dirs.get_mut(dir).expect("kept while a ticket waits");
            if entry.synced >= ticket {
                break Ok(());
            }
            if entry.failed >= ticket {
                break Err(io::Error::other(format!("syncing {} failed", dir.display())));
            }
            if !entry.running {
                entry.running = true;
                let covers = entry.asked;
                drop(dirs);
                let result = fsync(dir);
                dirs = self.lock();
                let entry = dirs.get_mut(dir).expect("kept while a ticket waits");
                entry.running = false;
                // A failed sync is never retried for the writes it covered: after a failure,
                // a second fsync may succeed without the lost name having reached the disk.
                match result {
                    Ok(()) => entry.synced = entry.synced.max(covers),
                    Err(_) => entry.failed = entry.failed.max(covers),
                }
                self.finished.notify_all();
                continue;
            }
            dirs = self.finished.wait(dirs).unwrap_or_else(PoisonError::into_inner);
        };
        let entry = dirs.get_mut(dir).expect("kept while a ticket waits");
        entry.waiting -= 1;
        if entry.waiting == 0 && !entry.running {
            dirs.remove(dir);
        }
        result
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<PathBuf, Dir>> {
        self.dirs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn concurrent_writers_share_syncs_and_each_waits_for_one_started_after_it_asked() {
        let syncs = Arc::new(DirSyncs::default());
        // Each sync records how many writers had asked when it started.
        let asked = Arc::new(AtomicUsize::new(0));
        let started_after = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (syncs, asked, started_after) =
                    (syncs.clone(), asked.clone(), started_after.clone());
                std::thread::spawn(move || {
                    let me = asked.fetch_add(1, Ordering::SeqCst) + 1;
                    syncs
                        .sync(Path::new("/d"), |_| {
                            started_after.lock().unwrap().push(asked.load(Ordering::SeqCst));
                            std::thread::sleep(Duration::from_millis(20));
                            Ok(())
                        })
                        .unwrap();
                    me
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let syncs_run = started_after.lock().unwrap().len();
        assert!(syncs_run < 16, "{syncs_run} syncs for 16 writers");
        // The last writer to ask was served by a sync that started after it asked.
        assert_eq!(*started_after.lock().unwrap().last().unwrap(), 16);
        assert!(syncs.lock().is_empty(), "nothing is kept once every writer is answered");
    }

    #[test]
    fn the_writers_a_failed_sync_covered_fail_and_later_ones_sync_again() {
        let syncs = DirSyncs::default();
        let calls = AtomicUsize::new(0);
        let failing = |_: &Path| {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(io::Error::other("EIO"))
        };
        assert!(syncs.sync(Path::new("/d"), failing).is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A writer asking after the failure gets a sync of its own.
        syncs.sync(Path::new("/d"), |_| Ok(())).unwrap();
    }
}
