//! A large PUT body hashed and written on a thread of its own while the request keeps receiving.
//!
//! MD5 (the ETag) costs more CPU per byte than anything else a PUT does. Hashed on the task that
//! receives the body, it stalls the socket as long as it runs, and the upload goes no faster than
//! one core. Here the receiving task only hands chunks on (by reference, batched), and a blocking
//! thread hashes each chunk and writes it straight from the same memory, so the two halves
//! overlap and no byte is copied into a write buffer on the way.

use std::fs::File;
use std::io::{self, Write};

use bytes::Bytes;
use md5::{Digest, Md5};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::StoreError;
use super::checksum::Hasher;

/// Bytes gathered before they are handed to the thread: few hand-overs, little memory held.
const BATCH: usize = 256 * 1024;
/// Batches that may wait for the thread; then receiving waits for it (back pressure).
const QUEUED: usize = 2;

/// The running hashes of a body: its MD5 and the additional checksum the client asked for.
pub(super) struct BodyHashes {
    pub md5: Md5,
    pub extra: Option<Hasher>,
}

impl BodyHashes {
    pub fn update(&mut self, data: &[u8]) {
        self.md5.update(data);
        if let Some(extra) = &mut self.extra {
            extra.update(data);
        }
    }
}

/// The thread writing one body to its temporary file, and the batch not yet handed to it.
pub(super) struct BodyWriter {
    batch: Vec<Bytes>,
    batched: usize,
    queue: mpsc::Sender<Vec<Bytes>>,
    worker: JoinHandle<io::Result<(File, BodyHashes)>>,
}

impl BodyWriter {
    /// Starts writing to `file`: first `written_ahead` (already hashed), then what is pushed.
    pub fn start(file: File, hashes: BodyHashes, written_ahead: Vec<u8>) -> Self {
        let (queue, mut batches) = mpsc::channel::<Vec<Bytes>>(QUEUED);
        let worker = tokio::task::spawn_blocking(move || {
            let (mut file, mut hashes) = (file, hashes);
            file.write_all(&written_ahead)?;
            drop(written_ahead);
            while let Some(batch) = batches.blocking_recv() {
                for chunk in batch {
                    // Hashed, then written while still in the cache.
                    hashes.update(&chunk);
                    file.write_all(&chunk)?;
                }
            }
            Ok((file, hashes))
        });
        Self { batch: Vec::new(), batched: 0, queue, worker }
    }

    /// Adds `chunk` to the body; waits only when the thread is behind.
    pub async fn push(&mut self, chunk: Bytes) -> Result<(), StoreError> {
        self.batched += chunk.len();
        self.batch.push(chunk);
        if self.batched >= BATCH {
            self.hand_over().await?;
        }
        Ok(())
    }

    /// Writes what is left and returns the file (written, not synced) and the body's hashes.
    pub async fn finish(mut self) -> Result<(File, BodyHashes), StoreError> {
        self.hand_over().await?;
        drop(self.queue);
        Ok(self.worker.await.map_err(io::Error::other)??)
    }

    async fn hand_over(&mut self) -> Result<(), StoreError> {
        self.batched = 0;
        let batch = std::mem::take(&mut self.batch);
        if batch.is_empty() || self.queue.send(batch).await.is_ok() {
            return Ok(());
        }
        // The thread ended early, which it does only on an error: that error is the answer.
        Err(match (&mut self.worker).await {
            Ok(Err(e)) => e.into(),
            Ok(Ok(_)) => io::Error::other("the body's writer stopped early").into(),
            Err(e) => io::Error::other(e).into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek};

    use super::*;
    use crate::store::checksum::{ChecksumAlgorithm, checksum_of};

    fn hashes() -> BodyHashes {
        BodyHashes { md5: Md5::new(), extra: Some(Hasher::new(ChecksumAlgorithm::Crc32)) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_file_holds_every_chunk_in_order_and_the_hashes_cover_them() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let (ahead, rest) = data.split_at(100_000);
        let mut first = hashes();
        first.update(ahead);
        let temp = tempfile::tempfile().unwrap();
        let mut writer = BodyWriter::start(temp, first, ahead.to_vec());
        // Chunks of every size from 1 byte to far past a batch.
        let mut offset = 0;
        for size in (0..).map(|i: usize| 1 + i * i * 97) {
            let end = (offset + size).min(rest.len());
            writer.push(Bytes::copy_from_slice(&rest[offset..end])).await.unwrap();
            offset = end;
            if offset == rest.len() {
                break;
            }
        }
        let (mut file, hashes) = writer.finish().await.unwrap();
        let mut written = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut written).unwrap();
        assert!(written == data, "the file differs from the body");
        assert_eq!(hashes.md5.finalize().as_slice(), Md5::digest(&data).as_slice());
        let crc = hashes.extra.unwrap().finalize();
        assert_eq!(crc, checksum_of(ChecksumAlgorithm::Crc32, &data));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_write_is_the_answer_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("read-only");
        std::fs::write(&path, b"").unwrap();
        let read_only = File::open(&path).unwrap();
        let mut writer = BodyWriter::start(read_only, hashes(), vec![1; 10]);
        let mut failed = None;
        for _ in 0..64 {
            if let Err(e) = writer.push(Bytes::from(vec![2; 64 * 1024])).await {
                failed = Some(e);
                break;
            }
        }
        let error = match failed {
            Some(e) => e,
            None => writer.finish().await.err().expect("writing to a read-only file fails"),
        };
        // EBADF: the write's own error, not a made-up one.
        assert!(matches!(&error, StoreError::Io(e) if e.raw_os_error() == Some(9)), "{error:?}");
    }
}
