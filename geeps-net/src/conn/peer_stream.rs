//! The two halves of a connection to a peer, plain TCP, TLS or shared
//! memory (a plain connection moved onto a segment, `shm_stream`), as one
//! type each, so the frame code reads and writes any without knowing which.
//! Plain TCP keeps tokio's owned halves (no lock between them); a TLS
//! stream is split through a lock, as rustls needs both directions. Must
//! never buffer or interpret bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::shm::segment::Segment;
use crate::shm::stream::{self as shm_stream, ShmRead, ShmWrite};

#[cfg(feature = "tls")]
type TlsStream = tokio_rustls::TlsStream<TcpStream>;

/// What a connection reads from.
pub(crate) enum ReadSide {
    Plain(OwnedReadHalf),
    #[cfg(feature = "tls")]
    Tls(tokio::io::ReadHalf<TlsStream>),
    Shm(ShmRead),
}

/// What a connection writes to.
pub(crate) enum WriteSide {
    Plain(OwnedWriteHalf),
    #[cfg(feature = "tls")]
    Tls(tokio::io::WriteHalf<TlsStream>),
    Shm(Box<ShmWrite>),
}

/// A plain TCP connection's halves.
pub(crate) fn plain(stream: TcpStream) -> (ReadSide, WriteSide) {
    let (rd, wr) = stream.into_split();
    (ReadSide::Plain(rd), WriteSide::Plain(wr))
}

/// A plain connection's halves moved onto shared memory `seg` (the socket
/// stays as the doorbell); other halves come back unchanged in `Err`.
pub(crate) fn onto_shm(
    rd: ReadSide,
    wr: WriteSide,
    seg: std::sync::Arc<Segment>,
    keeper: bool,
) -> Result<(ReadSide, WriteSide), (ReadSide, WriteSide)> {
    match (rd, wr) {
        (ReadSide::Plain(r), WriteSide::Plain(w)) => {
            let (r, w) = shm_stream::sides(seg, keeper, r, w);
            Ok((ReadSide::Shm(r), WriteSide::Shm(Box::new(w))))
        }
        other => Err(other),
    }
}

impl WriteSide {
    /// Keeps `payload` alive for the write of it that follows: over shared
    /// memory it may then go by reference (see `shm_stream.rs`).
    pub(crate) fn keep_alive(&mut self, payload: &bytes::Bytes) {
        if let WriteSide::Shm(w) = self {
            w.keep_alive(payload);
        }
    }
}

impl ReadSide {
    /// Whether this connection's data moves through shared memory.
    pub(crate) fn is_shm(&self) -> bool {
        matches!(self, ReadSide::Shm(_))
    }
}

/// A TLS connection's halves.
#[cfg(feature = "tls")]
pub(crate) fn tls(stream: TlsStream) -> (ReadSide, WriteSide) {
    let (rd, wr) = tokio::io::split(stream);
    (ReadSide::Tls(rd), WriteSide::Tls(wr))
}

impl AsyncRead for ReadSide {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ReadSide::Plain(r) => Pin::new(r).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            ReadSide::Tls(r) => Pin::new(r).poll_read(cx, buf),
            ReadSide::Shm(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteSide {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Plain(w) => Pin::new(w).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            WriteSide::Tls(w) => Pin::new(w).poll_write(cx, buf),
            WriteSide::Shm(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WriteSide::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tls")]
            WriteSide::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            WriteSide::Shm(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            WriteSide::Plain(w) => w.is_write_vectored(),
            #[cfg(feature = "tls")]
            WriteSide::Tls(w) => w.is_write_vectored(),
            WriteSide::Shm(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Plain(w) => Pin::new(w).poll_flush(cx),
            #[cfg(feature = "tls")]
            WriteSide::Tls(w) => Pin::new(w).poll_flush(cx),
            WriteSide::Shm(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WriteSide::Plain(w) => Pin::new(w).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            WriteSide::Tls(w) => Pin::new(w).poll_shutdown(cx),
            WriteSide::Shm(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
