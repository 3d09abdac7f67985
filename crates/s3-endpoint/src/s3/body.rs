//! Object bodies read into the process (those `zero_copy` does not send from the file: small
//! ones, and any over HTTP/2): large positioned reads on the blocking pool, one read ahead of the
//! socket, rather than many small reads that each hop between threads.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::Stream;
use s3s::StdError;
use s3s::stream::{ByteStream, RemainingLength};
use tokio::task::JoinHandle;

/// Bytes read at once. With the one read ahead, what a GET holds in memory at most twice.
pub const READ_CHUNK: usize = 1024 * 1024;

/// The bytes `range` of an open object file, read `READ_CHUNK` at a time.
#[derive(Debug)]
pub struct ObjectBody {
    file: Arc<File>,
    /// Where the next read starts.
    next: u64,
    end: u64,
    /// Bytes not yet handed out.
    remaining: u64,
    /// The read under way, started as soon as the chunk before it was handed out.
    reading: Option<JoinHandle<io::Result<Bytes>>>,
}

impl ObjectBody {
    /// Starts reading `range` of `file`. Must be called within a Tokio runtime.
    pub fn new(file: File, range: Range<u64>) -> Self {
        let mut body = Self {
            file: Arc::new(file),
            next: range.start,
            end: range.end,
            remaining: range.end.saturating_sub(range.start),
            reading: None,
        };
        body.read_ahead();
        body
    }

    fn read_ahead(&mut self) {
        if self.next >= self.end {
            return;
        }
        let len = usize::try_from(self.end - self.next).map_or(READ_CHUNK, |l| l.min(READ_CHUNK));
        let (file, offset) = (self.file.clone(), self.next);
        self.next += len as u64;
        self.reading = Some(tokio::task::spawn_blocking(move || read_at(&file, offset, len)));
    }
}

/// Exactly `len` bytes at `offset`; a file cut short behind the store's back is an error, so
/// that the client never takes a short body for the object.
fn read_at(file: &File, offset: u64, len: usize) -> io::Result<Bytes> {
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let at = offset + buf.len() as u64;
        // Into the vector's spare room, never zeroed first.
        let read = rustix::io::pread(file, rustix::buffer::spare_capacity(&mut buf), at)?;
        if read == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "object file cut short"));
        }
    }
    // The allocation may be larger than asked for: never more than the range.
    buf.truncate(len);
    Ok(Bytes::from(buf))
}

impl Stream for ObjectBody {
    type Item = Result<Bytes, StdError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(reading) = self.reading.as_mut() else { return Poll::Ready(None) };
        let read = ready!(Pin::new(reading).poll(cx));
        self.reading = None;
        match read.map_err(io::Error::other).and_then(|r| r) {
            Ok(chunk) => {
                self.remaining -= chunk.len() as u64;
                self.read_ahead();
                Poll::Ready(Some(Ok(chunk)))
            }
            Err(e) => {
                self.next = self.end;
                Poll::Ready(Some(Err(e.into())))
            }
        }
    }
}

impl ByteStream for ObjectBody {
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(usize::try_from(self.remaining).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use futures::StreamExt;

    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[tokio::test]
    async fn a_range_comes_in_few_large_chunks_and_exactly() {
        let data = pattern(3 * READ_CHUNK + 12_345);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        for range in [0..data.len() as u64, 5..(2 * READ_CHUNK as u64 + 9), 100..100, 7..8] {
            let file = file.try_clone().unwrap();
            let mut body = ObjectBody::new(file, range.clone());
            let expected = &data[range.start as usize..range.end as usize];
            assert_eq!(body.remaining_length().exact(), Some(expected.len()));
            let mut got = Vec::new();
            let mut chunks = 0;
            while let Some(chunk) = body.next().await {
                got.extend_from_slice(&chunk.unwrap());
                chunks += 1;
            }
            assert_eq!(got, expected, "{range:?}");
            assert_eq!(chunks, expected.len().div_ceil(READ_CHUNK), "{range:?}");
            assert_eq!(body.remaining_length().exact(), Some(0));
        }
    }

    #[tokio::test]
    async fn a_file_cut_short_is_an_error_not_a_short_body() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&pattern(1000)).unwrap();
        let mut body = ObjectBody::new(file, 0..2000);
        assert!(body.next().await.unwrap().is_err());
        assert!(body.next().await.is_none());
    }
}
