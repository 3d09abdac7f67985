//! Large GET bodies sent from the file to the socket by the kernel (`sendfile`), never read into
//! the process.
//!
//! hyper takes a body only as bytes in memory and has no way to send one from a file. Reading
//! the file to hand hyper those bytes, and hyper writing them to the socket, are two copies of
//! every byte served. Instead a large body is made of *placeholder* chunks, and the connection's
//! socket ([`SendfileStream`]) knows them by their address: where hyper writes a placeholder, the
//! socket sends the file range registered for it ([`FileSends`]), in order, with `sendfile`.
//!
//! This relies on hyper passing the body's chunks to `poll_write_vectored` as they are, which it
//! does for HTTP/1 on a socket that writes vectors (its queue strategy), and on it writing every
//! chunk it takes from a body in the order taken (it drops one only when the connection is
//! closing, and the connection's ranges go with it). Should a placeholder ever be copied instead
//! (a future hyper, or HTTP/2, which frames the data), the copy would be sent as the object's
//! bytes. That must fail loudly: the placeholder is one random 64-byte block repeated, and while
//! placeholders are pending, a plain write that holds the block closes the connection instead of
//! sending it. The client then sees a body cut short, never wrong bytes.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures::Stream;
use s3s::StdError;
use s3s::stream::{ByteStream, RemainingLength};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// Bodies from this size on are sent from the file; smaller ones are not worth it.
pub const MIN_ZERO_COPY: u64 = 1024 * 1024;
/// The length of one placeholder chunk (and of the placeholder).
const CHUNK: usize = 1024 * 1024;
/// The repeated block of the placeholder: any copy of 127 bytes or more holds it whole.
const BLOCK: usize = 64;

/// The placeholder: a random block, chosen once per process, repeated.
fn placeholder() -> &'static Bytes {
    static PLACEHOLDER: OnceLock<Bytes> = OnceLock::new();
    PLACEHOLDER.get_or_init(|| {
        let block: [u8; BLOCK] = rand::random();
        Bytes::from(block.repeat(CHUNK / BLOCK))
    })
}

/// Whether `slice` lies within the placeholder (by address, never by content).
fn is_placeholder(slice: &[u8]) -> bool {
    let whole = placeholder().as_ptr_range();
    let part = slice.as_ptr_range();
    !slice.is_empty() && whole.start <= part.start && part.end <= whole.end
}

/// One file range whose placeholder hyper has been given but not yet written.
#[derive(Debug)]
struct Pending {
    file: Arc<File>,
    offset: u64,
    len: u64,
}

/// The file ranges of one connection's placeholders, in the order hyper will write them.
#[derive(Debug, Default)]
pub struct FileSends {
    pending: Mutex<VecDeque<Pending>>,
}

impl FileSends {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `range` of `file` as placeholder chunks, each registered with the connection as it is handed
/// to hyper.
#[derive(Debug)]
pub struct ZeroCopyBody {
    file: Arc<File>,
    next: u64,
    end: u64,
    sends: Arc<FileSends>,
}

impl ZeroCopyBody {
    /// The body for bytes `start..end` of `file`, sent on the connection `sends` belongs to.
    pub fn new(file: File, start: u64, end: u64, sends: Arc<FileSends>) -> Self {
        Self { file: Arc::new(file), next: start, end, sends }
    }
}

impl Stream for ZeroCopyBody {
    type Item = Result<Bytes, StdError>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.next >= self.end {
            return Poll::Ready(None);
        }
        let len = (self.end - self.next).min(CHUNK as u64);
        let (file, offset) = (self.file.clone(), self.next);
        self.sends.queue().push_back(Pending { file, offset, len });
        self.next += len;
        // `len` is at most CHUNK, so it fits.
        Poll::Ready(Some(Ok(placeholder().slice(..len as usize))))
    }
}

impl ByteStream for ZeroCopyBody {
    fn remaining_length(&self) -> RemainingLength {
        let remaining = self.end.saturating_sub(self.next);
        RemainingLength::new_exact(usize::try_from(remaining).unwrap_or(usize::MAX))
    }
}

/// A connection's socket that sends placeholders' file ranges from their files.
#[derive(Debug)]
pub struct SendfileStream {
    socket: TcpStream,
    sends: Arc<FileSends>,
}

impl SendfileStream {
    /// `socket`, sending the ranges registered in `sends` where their placeholders are written.
    pub fn new(socket: TcpStream, sends: Arc<FileSends>) -> Self {
        Self { socket, sends }
    }

    /// Sends up to `len` bytes of the oldest pending range; how many went.
    fn poll_send_file(&self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.socket.poll_write_ready(cx))?;
            let sent = self.socket.try_io(Interest::WRITABLE, || {
                let mut queue = self.sends.queue();
                let Some(front) = queue.front_mut() else {
                    return Err(io::Error::other("a placeholder was written with no file range"));
                };
                let count = usize::try_from(front.len).map_or(len, |l| l.min(len));
                let mut offset = front.offset;
                let sent =
                    rustix::fs::sendfile(&self.socket, &*front.file, Some(&mut offset), count)?;
                if sent == 0 {
                    // The file is shorter than the object said: cut the body, never pad it.
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "object file cut short",
                    ));
                }
                front.offset = offset;
                front.len -= sent as u64;
                if front.len == 0 {
                    queue.pop_front();
                }
                Ok(sent)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    /// Refuses a plain write that holds a placeholder's bytes while placeholders are pending.
    fn check_plain(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        if self.sends.queue().is_empty() {
            return Ok(());
        }
        let block = &placeholder()[..BLOCK];
        if bufs.iter().any(|buf| memchr::memmem::find(buf, block).is_some()) {
            tracing::error!("a body placeholder was copied instead of sent from its file");
            return Err(io::Error::other("a body placeholder was copied; connection closed"));
        }
        Ok(())
    }
}

impl AsyncRead for SendfileStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_read(cx, buf)
    }
}

impl AsyncWrite for SendfileStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Plain bytes up to the first placeholder go as they are; a placeholder at the front
        // goes from its file. hyper calls again for the rest.
        let first = bufs.iter().position(|buf| is_placeholder(buf));
        match first {
            Some(0) => self.poll_send_file(cx, bufs[0].len()),
            _ => {
                let plain = &bufs[..first.unwrap_or(bufs.len())];
                self.check_plain(plain)?;
                Pin::new(&mut self.socket).poll_write_vectored(cx, plain)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 251) as u8).collect()
    }

    /// A connected pair: the sending side wrapped, and the receiving socket.
    async fn pair() -> (SendfileStream, Arc<FileSends>, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let sends = Arc::new(FileSends::default());
        (SendfileStream::new(server, sends.clone()), sends, client)
    }

    #[tokio::test]
    async fn placeholders_arrive_as_their_file_ranges_between_plain_bytes() {
        let data = pattern(3 * CHUNK + 12_345);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        let (mut socket, sends, mut receiver) = pair().await;
        let range = 7..(2 * CHUNK as u64 + 999);
        let mut body = ZeroCopyBody::new(file, range.start, range.end, sends.clone());
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            receiver.read_to_end(&mut got).await.unwrap();
            got
        });
        socket.write_all(b"HEAD\r\n").await.unwrap();
        let mut chunks = Vec::new();
        while let Some(chunk) = body.next().await {
            chunks.push(chunk.unwrap());
        }
        assert_eq!(body.remaining_length().exact(), Some(0));
        // Vectored, as hyper writes them: each placeholder goes in pieces as the socket takes it.
        let mut pending: Vec<Bytes> = chunks;
        while !pending.is_empty() {
            let slices: Vec<IoSlice<'_>> = pending.iter().map(|b| IoSlice::new(b)).collect();
            let mut written = socket.write_vectored(&slices).await.unwrap();
            while written > 0 {
                let n = written.min(pending[0].len());
                let _ = pending[0].split_to(n);
                if pending[0].is_empty() {
                    pending.remove(0);
                }
                written -= n;
            }
        }
        socket.write_all(b"TAIL").await.unwrap();
        socket.shutdown().await.unwrap();
        drop(socket);
        let got = reading.await.unwrap();
        let mut expected = b"HEAD\r\n".to_vec();
        expected.extend_from_slice(&data[range.start as usize..range.end as usize]);
        expected.extend_from_slice(b"TAIL");
        assert!(got == expected, "{} bytes received, {} expected", got.len(), expected.len());
        assert!(sends.queue().is_empty());
    }

    #[tokio::test]
    async fn a_copied_placeholder_closes_the_connection_instead_of_going_out() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&pattern(2 * CHUNK)).unwrap();
        let (mut socket, sends, _receiver) = pair().await;
        let mut body = ZeroCopyBody::new(file, 0, 2 * CHUNK as u64, sends);
        let chunk = body.next().await.unwrap().unwrap();
        // What a copying writer would hand over: the placeholder's bytes, somewhere else.
        let mut copied = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        copied.extend_from_slice(&chunk[1000..1200]);
        let refused = socket.write(&copied).await.unwrap_err();
        assert!(refused.to_string().contains("placeholder"), "{refused}");
        // A plain write without the block still goes.
        assert_eq!(socket.write(b"HTTP/1.1 200 OK\r\n").await.unwrap(), 17);
    }

    #[tokio::test]
    async fn a_file_shorter_than_its_range_cuts_the_body() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&pattern(CHUNK)).unwrap();
        let (mut socket, sends, _receiver) = pair().await;
        let mut body = ZeroCopyBody::new(file, 0, 2 * CHUNK as u64, sends);
        let first = body.next().await.unwrap().unwrap();
        let second = body.next().await.unwrap().unwrap();
        let mut written = 0;
        while written < first.len() {
            written += socket.write(&first[written..]).await.unwrap();
        }
        let error = socket.write(&second).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }
}
