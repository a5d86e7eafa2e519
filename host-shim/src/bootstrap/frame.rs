//! One bootstrap message on a Unix stream socket: a tag, a payload, and open file
//! descriptors passed with it (`SCM_RIGHTS`), every read bounded by a deadline and every
//! write free of `SIGPIPE`.
//!
//! On the wire: a 12-byte header (tag, payload bytes, descriptor count; little-endian
//! `u32`s) sent by one `sendmsg` that carries the descriptors, then the payload. The
//! kernel delivers the descriptors with the header's first byte, so the receiver's first
//! `recvmsg` (which reads that byte) collects all of them.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// The most descriptors one message may carry (Linux's `SCM_MAX_FD`).
pub const MAX_FDS: usize = 253;

/// The largest payload a receiver accepts.
pub const MAX_PAYLOAD: usize = 16 << 20;

const HEADER: usize = 12;

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// A PE's first message to PE 0: its number and the PE count it was started with.
    Hello,
    /// A PE's part of a collective call, to PE 0.
    Contribute,
    /// PE 0's answer to a collective call (or to the hellos): every PE's part.
    Gathered,
    /// PE 0's answer when the call failed for any PE: the reason, as text. Also, once a
    /// bootstrap is watched ([`super::Watch`]), a PE's word that it stopped (and PE 0's to
    /// every other PE that one did).
    Abort,
    /// A watched PE leaves on purpose (its communicator was destroyed): its connection's
    /// end is no failure.
    Leave,
}

impl Tag {
    fn code(self) -> u32 {
        match self {
            Self::Hello => 1,
            Self::Contribute => 2,
            Self::Gathered => 3,
            Self::Abort => 4,
            Self::Leave => 5,
        }
    }

    fn from_code(code: u32) -> Option<Self> {
        [Self::Hello, Self::Contribute, Self::Gathered, Self::Abort, Self::Leave].into_iter().find(|t| t.code() == code)
    }
}

/// A received message.
#[derive(Debug)]
pub struct Frame {
    pub tag: Tag,
    pub payload: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// Sends one message. Blocks only while the socket's buffer is full, at most the
/// stream's write timeout.
pub fn send(stream: &UnixStream, tag: Tag, payload: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS || payload.len() > MAX_PAYLOAD {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("a bootstrap message of {} bytes and {} descriptors", payload.len(), fds.len())));
    }
    let mut header = [0u8; HEADER];
    for (at, word) in [tag.code(), payload.len() as u32, fds.len() as u32].into_iter().enumerate() {
        header[4 * at..4 * at + 4].copy_from_slice(&word.to_le_bytes());
    }
    let fd_bytes = size_of_val(fds) as u32;
    // SAFETY: pure arithmetic on a small count.
    let space = if fds.is_empty() { 0 } else { (unsafe { libc::CMSG_SPACE(fd_bytes) }) as usize };
    let mut control = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec { iov_base: header.as_mut_ptr().cast(), iov_len: HEADER };
    // SAFETY: an all-zero msghdr is valid (no name, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds CMSG_SPACE(fd_bytes) bytes, 8-byte aligned, so
        // its first header and `fds.len()` descriptors after it fit.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
            let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `msg` points at the header and control buffers, alive for the call.
    let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &raw const msg, libc::MSG_NOSIGNAL) };
    let sent = usize::try_from(sent).map_err(|_| io::Error::last_os_error())?;
    send_all(stream, &header[sent..])?;
    send_all(stream, payload)
}

/// Writes all of `bytes` without raising `SIGPIPE` where the peer has gone.
fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes.
        let sent = unsafe { libc::send(stream.as_raw_fd(), bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        match usize::try_from(sent) {
            Ok(n) => bytes = &bytes[n..],
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Receives one message, by `deadline`: `TimedOut` after it, `UnexpectedEof` where the
/// peer closed its end (exited) before a whole message arrived.
pub fn recv(stream: &UnixStream, deadline: Instant) -> io::Result<Frame> {
    let mut header = [0u8; HEADER];
    let mut fds = Vec::new();
    let mut got = recv_first(stream, &mut header, &mut fds, deadline)?;
    while got < HEADER {
        got += recv_some(stream, &mut header[got..], deadline)?;
    }
    let word = |at: usize| u32::from_le_bytes([header[4 * at], header[4 * at + 1], header[4 * at + 2], header[4 * at + 3]]);
    let tag = Tag::from_code(word(0)).ok_or_else(|| invalid(format!("a bootstrap message with tag {}", word(0))))?;
    let (len, nfds) = (word(1) as usize, word(2) as usize);
    if len > MAX_PAYLOAD || nfds != fds.len() {
        return Err(invalid(format!("a bootstrap message of {len} bytes announcing {nfds} descriptors with {} attached", fds.len())));
    }
    let mut payload = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        filled += recv_some(stream, &mut payload[filled..], deadline)?;
    }
    Ok(Frame { tag, payload, fds })
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Bounds the next read by what is left until `deadline`.
fn arm(stream: &UnixStream, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))
}

/// Maps a read's result: `EAGAIN` of an expired read timeout is `TimedOut`, 0 bytes EOF.
fn read_result(n: isize) -> io::Result<Option<usize>> {
    match usize::try_from(n) {
        Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
        Ok(n) => Ok(Some(n)),
        Err(_) => {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => Ok(None),
                io::ErrorKind::WouldBlock => Err(io::ErrorKind::TimedOut.into()),
                _ => Err(e),
            }
        }
    }
}

/// The first read of a message: some of the header, and every descriptor sent with it.
fn recv_first(stream: &UnixStream, header: &mut [u8; HEADER], fds: &mut Vec<OwnedFd>, deadline: Instant) -> io::Result<usize> {
    // SAFETY: pure arithmetic on a constant.
    let space = (unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<RawFd>()) as u32) }) as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    loop {
        arm(stream, deadline)?;
        let mut iov = libc::iovec { iov_base: header.as_mut_ptr().cast(), iov_len: HEADER };
        // SAFETY: an all-zero msghdr is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: `msg` points at live buffers of the sizes it gives.
        let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        let Some(n) = read_result(n)? else { continue };
        // SAFETY: the kernel filled `msg`'s control buffer; the CMSG macros walk it within
        // `msg_controllen`, and every SCM_RIGHTS entry holds descriptors now owned by us.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<RawFd>();
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    fds.extend((0..count).map(|i| OwnedFd::from_raw_fd(data.add(i).read_unaligned())));
                }
                cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(invalid("a bootstrap message carried more descriptors than allowed".into()));
        }
        return Ok(n);
    }
}

/// One read of the rest of a message.
fn recv_some(stream: &UnixStream, buf: &mut [u8], deadline: Instant) -> io::Result<usize> {
    loop {
        arm(stream, deadline)?;
        // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
        let n = unsafe { libc::recv(stream.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if let Some(n) = read_result(n)? {
            return Ok(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    #[test]
    fn payload_and_descriptors_arrive_together() {
        let (a, b) = UnixStream::pair().unwrap();
        let dir = std::env::temp_dir().join(format!("ferroccl-frame-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files: Vec<std::fs::File> = (0..3)
            .map(|i| {
                let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.join(format!("f{i}"))).unwrap();
                write!(f, "file {i}").unwrap();
                f
            })
            .collect();
        let borrowed: Vec<BorrowedFd<'_>> = files.iter().map(std::os::fd::AsFd::as_fd).collect();
        send(&a, Tag::Contribute, b"hello", &borrowed).unwrap();
        send(&a, Tag::Abort, &[7u8; 100_000], &[]).unwrap();
        let first = recv(&b, soon()).unwrap();
        assert_eq!((first.tag, first.payload.as_slice(), first.fds.len()), (Tag::Contribute, &b"hello"[..], 3));
        for (i, fd) in first.fds.into_iter().enumerate() {
            let mut f = std::fs::File::from(fd);
            let mut text = String::new();
            f.rewind().unwrap();
            f.read_to_string(&mut text).unwrap();
            assert_eq!(text, format!("file {i}"));
        }
        let second = recv(&b, soon()).unwrap();
        assert_eq!((second.tag, second.payload.len(), second.fds.len()), (Tag::Abort, 100_000, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_silent_peer_times_out_and_a_closed_one_is_eof() {
        let (a, b) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let err = recv(&b, start + Duration::from_millis(50)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(start.elapsed() < Duration::from_secs(5));
        // Half a header, then gone.
        (&a).write_all(&[1, 0]).unwrap();
        drop(a);
        assert_eq!(recv(&b, soon()).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn malformed_headers_are_refused() {
        for header in [[9u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0], [1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0]] {
            let (a, b) = UnixStream::pair().unwrap();
            (&a).write_all(&header).unwrap();
            assert_eq!(recv(&b, soon()).unwrap_err().kind(), io::ErrorKind::InvalidData, "{header:?}");
        }
    }

    #[test]
    fn writing_to_a_closed_peer_is_an_error_not_a_signal() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        assert!(send(&a, Tag::Hello, &[0; 64], &[]).is_err());
    }
}
