//! Framing on a byte stream: `u32` little-endian header length, the prost
//! header, then `payload_len` raw bytes. Reading enforces size limits before
//! allocating, so a hostile or corrupt peer cannot make a keeper allocate
//! without bound. Payloads of a connection's data frames are read into
//! recycled buffers (`RecvPool`); large payloads are written with the header
//! in one vectored write, never copied. Never interprets the header beyond
//! its payload length.

use std::io::IoSlice;

use bytes::Bytes;
use geeps_core::transport::LandingSlot;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::wire::recv_pool::RecvPool;
use crate::wire::Header;

/// Gives the slot a frame's payload is read into, if any (see `Landing`).
pub(crate) type Lander<'a> = dyn Fn(&Header) -> Option<LandingSlot> + Sync + 'a;

/// Largest header accepted once a peer is authenticated.
pub const MAX_HEADER_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("connection closed in the middle of a frame ({0})")]
    Truncated(&'static str),
    #[error("header of {len} bytes exceeds the limit of {limit}")]
    HeaderTooLarge { len: usize, limit: usize },
    #[error("payload of {len} bytes exceeds the limit of {limit} (raise `max_message_bytes` on every rank if this is intended)")]
    PayloadTooLarge { len: u64, limit: u64 },
    #[error("undecodable header: {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

async fn read_exact_or<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8], what: &'static str) -> Result<(), FrameError> {
    match r.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(FrameError::Truncated(what)),
        Err(e) => Err(e.into()),
    }
}

/// Reads one frame of an authenticated peer. `Closed` only at a clean frame boundary.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max_payload: u64) -> Result<(Header, Bytes), FrameError> {
    read_frame_within(r, MAX_HEADER_BYTES, max_payload).await
}

/// `read_frame`, with the payload read into a buffer of `pool`.
pub(crate) async fn read_frame_pooled<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: u64,
    pool: &RecvPool,
) -> Result<(Header, Bytes), FrameError> {
    read_frame_to(r, MAX_HEADER_BYTES, max_payload, Some(pool), None).await
}

/// `read_frame_pooled`, with the payload read into the slot `land` gives
/// for the frame's header, when it gives one (see `Landing`).
pub(crate) async fn read_frame_landing<R: AsyncRead + Unpin>(
    r: &mut R,
    max_payload: u64,
    pool: &RecvPool,
    land: &Lander<'_>,
) -> Result<(Header, Bytes), FrameError> {
    read_frame_to(r, MAX_HEADER_BYTES, max_payload, Some(pool), Some(land)).await
}

/// Reads one frame whose header may be `max_header` bytes at most and its
/// payload `max_payload`: both declared lengths are checked before anything
/// is allocated for them (a peer not yet authenticated gets small limits).
pub async fn read_frame_within<R: AsyncRead + Unpin>(
    r: &mut R,
    max_header: usize,
    max_payload: u64,
) -> Result<(Header, Bytes), FrameError> {
    read_frame_to(r, max_header, max_payload, None, None).await
}

async fn read_frame_to<R: AsyncRead + Unpin>(
    r: &mut R,
    max_header: usize,
    max_payload: u64,
    pool: Option<&RecvPool>,
    land: Option<&Lander<'_>>,
) -> Result<(Header, Bytes), FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..]).await?;
        if n == 0 {
            return Err(if got == 0 { FrameError::Closed } else { FrameError::Truncated("header length") });
        }
        got += n;
    }
    let header_len = u32::from_le_bytes(len) as usize;
    if header_len > max_header {
        return Err(FrameError::HeaderTooLarge { len: header_len, limit: max_header });
    }
    let mut head = vec![0u8; header_len];
    read_exact_or(r, &mut head, "header").await?;
    let header = Header::decode(&head[..])?;
    if header.payload_len > max_payload {
        return Err(FrameError::PayloadTooLarge { len: header.payload_len, limit: max_payload });
    }
    let len = header.payload_len as usize;
    if let Some(mut slot) = land.and_then(|land| land(&header)).filter(|s| len > 0 && s.as_ref().len() == len) {
        read_exact_or(r, slot.bytes_mut(), "payload").await?;
        return Ok((header, slot.into_bytes()));
    }
    // Read straight into uninitialised capacity, never past this frame.
    let mut payload = match pool {
        Some(p) => p.take(len),
        None => Vec::with_capacity(len),
    };
    let mut limited = r.take(len as u64);
    while payload.len() < len {
        if limited.read_buf(&mut payload).await? == 0 {
            return Err(FrameError::Truncated("payload"));
        }
    }
    let payload = match pool {
        Some(p) => p.share(payload),
        None => Bytes::from(payload),
    };
    Ok((header, payload))
}

/// Writes one frame (header length, header, payload) without copying the payload.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    mut header: Header,
    payload: Option<&Bytes>,
) -> Result<(), FrameError> {
    header.payload_len = payload.map_or(0, |p| p.len() as u64);
    let mut head = Vec::with_capacity(4 + header.encoded_len());
    head.extend_from_slice(&(header.encoded_len() as u32).to_le_bytes());
    header.encode(&mut head).map_err(|e| FrameError::Io(std::io::Error::other(e)))?;
    match payload {
        Some(p) if !p.is_empty() => write_both(w, &head, p).await?,
        _ => w.write_all(&head).await?,
    }
    Ok(())
}

/// Writes `head` then `body` with vectored writes: one system call for a
/// header and its large payload (a buffered writer passes writes larger
/// than its buffer straight to the socket), and no copy of the payload.
async fn write_both<W: AsyncWrite + Unpin>(w: &mut W, mut head: &[u8], mut body: &[u8]) -> std::io::Result<()> {
    while !head.is_empty() {
        let n = w.write_vectored(&[IoSlice::new(head), IoSlice::new(body)]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        if n < head.len() {
            head = &head[n..];
        } else {
            body = &body[n - head.len()..];
            head = &[];
        }
    }
    w.write_all(body).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Body, Ping, Refused};

    #[tokio::test]
    async fn roundtrip_and_limits() {
        let mut buf = Vec::new();
        let payload = Bytes::from_static(&[1, 2, 3, 4]);
        write_frame(&mut buf, Header::new(Body::Ping(Ping {})), Some(&payload)).await.unwrap();
        write_frame(&mut buf, Header::new(Body::Refused(Refused { reason: "x".into() })), None).await.unwrap();
        let mut r = &buf[..];
        let (h, p) = read_frame(&mut r, 16).await.unwrap();
        assert_eq!(h.body, Some(Body::Ping(Ping {})));
        assert_eq!(p, payload);
        let (h, p) = read_frame(&mut r, 16).await.unwrap();
        assert!(matches!(h.body, Some(Body::Refused(_))));
        assert!(p.is_empty());
        assert!(matches!(read_frame(&mut r, 16).await, Err(FrameError::Closed)));

        // Payload over the limit is refused before it is read.
        let mut r = &buf[..];
        assert!(matches!(read_frame(&mut r, 3).await, Err(FrameError::PayloadTooLarge { len: 4, limit: 3 })));
        // Truncated anywhere: an error, not a hang or a panic.
        for cut in 1..buf.len() / 2 {
            let mut r = &buf[..cut];
            let e = read_frame(&mut r, 16).await.unwrap_err();
            assert!(matches!(e, FrameError::Truncated(_)), "cut {cut}: {e}");
        }
        // A huge declared header is refused.
        let mut bad = (u32::MAX).to_le_bytes().to_vec();
        bad.extend_from_slice(&[0; 8]);
        assert!(matches!(read_frame(&mut &bad[..], 16).await, Err(FrameError::HeaderTooLarge { .. })));
        // Garbage header bytes.
        let mut bad = 3u32.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(matches!(read_frame(&mut &bad[..], 16).await, Err(FrameError::Decode(_))));
    }

    #[tokio::test]
    async fn large_frames_survive_short_vectored_writes_and_pooled_reads() {
        // A duplex pipe of 7 bytes splits every vectored write anywhere:
        // inside the header, at its end, inside the payload.
        let (mut a, mut b) = tokio::io::duplex(7);
        let payload = Bytes::from((0..200_000u32).map(|i| i as u8).collect::<Vec<_>>());
        let sent = payload.clone();
        let writer = tokio::spawn(async move {
            for _ in 0..2 {
                write_frame(&mut a, Header::new(Body::Ping(Ping {})), Some(&sent)).await.unwrap();
            }
        });
        let pool = RecvPool::new(1);
        for _ in 0..2 {
            let (h, p) = read_frame_pooled(&mut b, 1 << 20, &pool).await.unwrap();
            assert_eq!(h.body, Some(Body::Ping(Ping {})));
            assert_eq!(p, payload);
        }
        writer.await.unwrap();
        // A peer that stops mid-payload is a truncation, pooled or not.
        let (mut a, mut b) = tokio::io::duplex(1 << 20);
        write_frame(&mut a, Header::new(Body::Ping(Ping {})), Some(&payload)).await.unwrap();
        let mut cut = vec![0u8; 1000];
        tokio::io::AsyncReadExt::read_exact(&mut b, &mut cut).await.unwrap();
        drop(b);
        let (mut c, mut d) = tokio::io::duplex(1 << 20);
        c.write_all(&cut).await.unwrap();
        drop(c);
        drop(a);
        assert!(matches!(read_frame_pooled(&mut d, 1 << 20, &pool).await, Err(FrameError::Truncated("payload"))));
    }

    #[tokio::test]
    async fn publications_are_read_into_the_slot_they_land_in() {
        use crate::wire::PublishHeader;
        use geeps_core::transport::Landing;
        use geeps_core::{TableKind, TableSpec};

        let tables = [TableSpec { name: "w".into(), kind: TableKind::Parameter, rows: 4 }];
        let landing = Landing::new(&tables, 2, 2);
        let publish = |partition| {
            Header::new(Body::Publish(PublishHeader {
                table: 0,
                partition,
                age: 1,
                included: vec![1],
                ..Default::default()
            }))
        };
        let land = |h: &Header| match &h.body {
            Some(Body::Publish(p)) => landing.slot(p.table, p.partition, p.age, h.payload_len as usize),
            _ => None,
        };
        let pool = RecvPool::new(1);
        let mut buf = Vec::new();
        let rows = Bytes::from((0..16u8).collect::<Vec<_>>());
        write_frame(&mut buf, publish(0), Some(&rows)).await.unwrap();
        write_frame(&mut buf, publish(1), Some(&rows)).await.unwrap();
        // Not a publication, or not a partition's length: read as usual.
        write_frame(&mut buf, Header::new(Body::Ping(Ping {})), Some(&rows)).await.unwrap();
        write_frame(&mut buf, publish(0), Some(&rows.slice(..8))).await.unwrap();
        let mut r = &buf[..];
        let (_, p0) = read_frame_landing(&mut r, 1 << 20, &pool, &land).await.unwrap();
        let (_, p1) = read_frame_landing(&mut r, 1 << 20, &pool, &land).await.unwrap();
        assert_eq!((&p0, &p1), (&rows, &rows));
        assert_eq!(p1.as_ptr() as usize, p0.as_ptr() as usize + 16, "side by side in one buffer");
        for _ in 0..2 {
            let (_, p) = read_frame_landing(&mut r, 1 << 20, &pool, &land).await.unwrap();
            assert!(!p.as_ptr_range().contains(&p0.as_ptr()) && !p.as_ptr_range().contains(&p1.as_ptr()));
        }
        // Cut inside a landing payload: a truncation, and what had landed stays.
        let mut cut = Vec::new();
        write_frame(
            &mut cut,
            Header::new(Body::Publish(PublishHeader {
                table: 0,
                partition: 0,
                age: 2,
                included: vec![2],
                ..Default::default()
            })),
            Some(&rows),
        )
        .await
        .unwrap();
        cut.truncate(cut.len() - 3);
        let e = read_frame_landing(&mut &cut[..], 1 << 20, &pool, &land).await.unwrap_err();
        assert!(matches!(e, FrameError::Truncated("payload")), "{e}");
        assert_eq!((&p0, &p1), (&rows, &rows));
    }
}
