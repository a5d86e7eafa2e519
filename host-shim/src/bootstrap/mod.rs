//! The bootstrap of PEs in several processes on one node (NVSHMEM's model: one process
//! per GPU): PE 0 listens on a Unix socket, every other PE connects, and collective calls
//! gather every PE's bytes and open file descriptors (the symmetric heap's exported
//! memory handles travel as descriptors, `SCM_RIGHTS`) through PE 0 to every PE.
//!
//! No call can hang. Each has a time budget: a PE that never arrives, exits, or does not
//! take part in a call makes PE 0 tell every other PE why (`Abort`), and every PE's call
//! fails with [`Error::Bootstrap`] naming the PE; a PE that waits on a PE 0 that is gone
//! fails on its own (end of file, or its budget plus [`ANSWER_GRACE`]). After a failure the
//! bootstrap refuses every call with the same reason. Every collective call names what it
//! is; PEs at different calls (one at `malloc`, one at `barrier`) fail too.

pub mod env;
mod frame;
mod rendezvous;
pub mod watch;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{Error, Result};
pub use env::PeEnv;
use frame::{Frame, Tag};
pub use rendezvous::Rendezvous;
pub use watch::{Watch, WatchAbort};

/// How much longer than its budget a PE waits for PE 0's answer, so that PE 0's own
/// budget runs out first and its explanation arrives.
pub const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// What one PE gave a collective call.
#[derive(Debug)]
pub struct Part {
    pub bytes: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// One process's end of the bootstrap.
#[derive(Debug)]
pub struct Bootstrap {
    pe: usize,
    n_pes: usize,
    budget: Duration,
    links: Links,
    /// Collective calls made so far (each PE counts its own; PE 0 checks they agree).
    calls: u64,
    /// Why the bootstrap failed, once it has.
    failed: Option<String>,
}

#[derive(Debug)]
enum Links {
    /// The only PE.
    Alone,
    /// PE 0: a connection to every other PE (`peers[pe - 1]`).
    Root { peers: Vec<UnixStream> },
    /// Any other PE: its connection to PE 0.
    Leaf(UnixStream),
}

impl Bootstrap {
    /// Joins the PEs that `env` names (see [`PeEnv::from_env`]), each call bounded by
    /// `budget`.
    pub fn join_env(env: &PeEnv, budget: Duration) -> Result<Self> {
        Self::join(env.pe, env.n_pes, &env.rendezvous, budget)
    }

    /// Joins `n_pes` PEs as PE `pe`, meeting at the Unix socket `rendezvous` (PE 0
    /// creates it, replacing a socket left by an earlier run, and removes it once every
    /// PE has arrived). Every PE returns once all have arrived, or fails within `budget`
    /// (plus [`ANSWER_GRACE`] where PE 0 never answers).
    pub fn join(pe: usize, n_pes: usize, rendezvous: &Path, budget: Duration) -> Result<Self> {
        Self::join_at(pe, n_pes, &Rendezvous::Path(rendezvous.to_path_buf()), budget)
    }

    /// As [`Bootstrap::join`], meeting at `rendezvous` (a socket file or an abstract name).
    pub fn join_at(pe: usize, n_pes: usize, rendezvous: &Rendezvous, budget: Duration) -> Result<Self> {
        if pe >= n_pes {
            return Err(Error::InvalidArgument(format!("PE {pe} of {n_pes}")));
        }
        let links = match (pe, n_pes) {
            (_, 1) => Links::Alone,
            (0, _) => Links::Root { peers: accept_all(n_pes, rendezvous, budget)? },
            _ => Links::Leaf(connect(pe, n_pes, rendezvous, budget)?),
        };
        Ok(Self { pe, n_pes, budget, links, calls: 0, failed: None })
    }

    /// This process's PE.
    pub fn pe(&self) -> usize {
        self.pe
    }

    /// The number of PEs.
    pub fn n_pes(&self) -> usize {
        self.n_pes
    }

    /// The collective call `what`: every PE gives `bytes` and `fds` (copies of the
    /// descriptors are sent; the caller keeps its own); every PE gets every PE's part, in
    /// PE order (its own part back with fresh descriptors). Fails on every PE, with the
    /// same reason, where any PE fails, is at another call, or is gone.
    pub fn all_gather(&mut self, what: &str, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<Vec<Part>> {
        if let Some(why) = &self.failed {
            return Err(Error::Bootstrap(why.clone()));
        }
        self.calls += 1;
        let label = format!("{what} (collective call {})", self.calls);
        let result = match &self.links {
            Links::Alone => own_part(bytes, fds).map(|p| vec![p]).map_err(|e| format!("copying descriptors: {e}")),
            Links::Root { peers } => gather_at_root(peers, &label, bytes, fds, self.budget),
            Links::Leaf(root) => gather_at_leaf(root, self.pe, &label, bytes, fds, self.budget),
        };
        result.map_err(|why| {
            self.failed = Some(why.clone());
            Error::Bootstrap(why)
        })
    }

    /// Waits until every PE has called `barrier` (an all-gather of nothing).
    pub fn barrier(&mut self) -> Result<()> {
        self.all_gather("barrier", &[], &[]).map(drop)
    }
}

/// A part of one's own: the bytes, and duplicates of the descriptors.
fn own_part(bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<Part> {
    Ok(Part { bytes: bytes.to_vec(), fds: fds.iter().map(|fd| fd.try_clone_to_owned()).collect::<io::Result<_>>()? })
}

/// What a failed read from PE `pe` means.
fn lost(pe: usize, during: &str, budget: Duration, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => format!("PE {pe} closed its bootstrap connection (exited?) before {during}"),
        io::ErrorKind::TimedOut => format!("PE {pe} did not reach {during} within {budget:?}"),
        _ => format!("PE {pe}'s bootstrap connection failed before {during}: {e}"),
    }
}

/// PE 0's answer to every other PE that a call failed, then the reason.
fn abort_all(peers: &[UnixStream], why: String) -> String {
    for peer in peers {
        // Best effort: a peer that is gone learns nothing, and needs nothing.
        let _ = frame::send(peer, Tag::Abort, why.as_bytes(), &[]);
    }
    why
}

/// PE 0's side of `join`: listens at `rendezvous` until the other `n_pes - 1` PEs have
/// said hello, each once, with the same PE count.
fn accept_all(n_pes: usize, rendezvous: &Rendezvous, budget: Duration) -> Result<Vec<UnixStream>> {
    let deadline = Instant::now() + budget;
    let listening = rendezvous.listen()?;
    let listener = &listening.listener;
    listener.set_nonblocking(true).map_err(|e| rendezvous.failed("listening", &e))?;
    let mut arrived: Vec<Option<UnixStream>> = (1..n_pes).map(|_| None).collect();
    let fail = |arrived: &[Option<UnixStream>], also: Option<UnixStream>, why: String| {
        let mut others: Vec<UnixStream> = arrived.iter().flatten().filter_map(|s| s.try_clone().ok()).collect();
        others.extend(also);
        Error::Bootstrap(abort_all(&others, why))
    };
    while arrived.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((stream, _)) => {
                let ready = stream.set_nonblocking(false).and_then(|()| stream.set_write_timeout(Some(budget)));
                // A connection that says nothing sensible is not a PE: it is dropped.
                let Ok(Frame { tag: Tag::Hello, payload, .. }) = ready.and_then(|()| frame::recv(&stream, deadline)) else { continue };
                let why = match hello_from(&payload, n_pes) {
                    Ok(pe) if arrived[pe - 1].is_none() => {
                        arrived[pe - 1] = Some(stream);
                        continue;
                    }
                    Ok(pe) => format!("two processes joined as PE {pe}"),
                    Err(why) => why,
                };
                return Err(fail(&arrived, Some(stream), why));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let missing: Vec<String> = arrived.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| (i + 1).to_string()).collect();
                let why = format!("PE(s) {} of {n_pes} never reached the rendezvous {rendezvous} within {budget:?}", missing.join(", "));
                return Err(fail(&arrived, None, why));
            }
            Err(e) => return Err(fail(&arrived, None, format!("accepting at {rendezvous}: {e}"))),
        }
    }
    let peers: Vec<UnixStream> = arrived.into_iter().flatten().collect();
    for (i, peer) in peers.iter().enumerate() {
        if let Err(e) = frame::send(peer, Tag::Gathered, &[], &[]) {
            return Err(Error::Bootstrap(abort_all(&peers, format!("PE {} left during the rendezvous: {e}", i + 1))));
        }
    }
    Ok(peers)
}

/// The PE number in a hello, checked against PE 0's PE count.
fn hello_from(payload: &[u8], n_pes: usize) -> Result<usize, String> {
    let words: Vec<u64> = payload.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
    match words[..] {
        [pe, n] if n as usize != n_pes => Err(format!("PE {pe} was started for {n} PEs, PE 0 for {n_pes}")),
        [pe, _] if (1..n_pes as u64).contains(&pe) => Ok(pe as usize),
        [pe, _] => Err(format!("a process joined as PE {pe} of {n_pes}")),
        _ => Err("a malformed hello".into()),
    }
}

/// Any other PE's side of `join`: connects (retrying while PE 0 is not listening yet),
/// says hello, and waits for PE 0's word that everyone is there.
fn connect(pe: usize, n_pes: usize, rendezvous: &Rendezvous, budget: Duration) -> Result<UnixStream> {
    let deadline = Instant::now() + budget;
    let stream = loop {
        match rendezvous.connect() {
            Ok(stream) => break stream,
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => {
                return Err(Error::Bootstrap(format!("PE 0 never opened the rendezvous {rendezvous} within {budget:?}")));
            }
            Err(e) => return Err(rendezvous.failed("connecting", &e)),
        }
    };
    stream.set_write_timeout(Some(budget)).map_err(|e| rendezvous.failed("connecting", &e))?;
    let hello: Vec<u8> = [pe as u64, n_pes as u64].iter().flat_map(|w| w.to_le_bytes()).collect();
    // As in a collective call, a failed send may have an abort waiting behind it.
    let sent = frame::send(&stream, Tag::Hello, &hello, &[]);
    match frame::recv(&stream, deadline + ANSWER_GRACE) {
        Ok(Frame { tag: Tag::Gathered, .. }) => Ok(stream),
        Ok(Frame { tag: Tag::Abort, payload, .. }) => Err(Error::Bootstrap(String::from_utf8_lossy(&payload).into_owned())),
        Ok(other) => Err(Error::Bootstrap(format!("PE 0 answered the rendezvous with {:?}", other.tag))),
        Err(e) => Err(Error::Bootstrap(lost(0, "the end of the rendezvous", budget, sent.as_ref().err().unwrap_or(&e)))),
    }
}

/// A contribution on the wire: the call's label, then the bytes.
fn contribution(label: &str, bytes: &[u8]) -> Vec<u8> {
    let mut out = (label.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(bytes);
    out
}

/// Splits a contribution into its label and bytes.
fn split_contribution(payload: &[u8]) -> Option<(&str, &[u8])> {
    let len = u32::from_le_bytes(payload.get(..4)?.try_into().ok()?) as usize;
    let label = std::str::from_utf8(payload.get(4..4 + len)?).ok()?;
    Some((label, &payload[4 + len..]))
}

/// PE 0's side of a collective call: every other PE's contribution (same label), then
/// every part to every PE.
fn gather_at_root(peers: &[UnixStream], label: &str, bytes: &[u8], fds: &[BorrowedFd<'_>], budget: Duration) -> Result<Vec<Part>, String> {
    let deadline = Instant::now() + budget;
    let mut parts = vec![own_part(bytes, fds).map_err(|e| abort_all(peers, format!("PE 0 copying its descriptors: {e}")))?];
    for (i, peer) in peers.iter().enumerate() {
        let pe = i + 1;
        let part = match frame::recv(peer, deadline) {
            Ok(Frame { tag: Tag::Contribute, payload, fds }) => match split_contribution(&payload) {
                Some((theirs, bytes)) if theirs == label => Part { bytes: bytes.to_vec(), fds },
                Some((theirs, _)) => return Err(abort_all(peers, format!("PE {pe} is at {theirs} while PE 0 is at {label}"))),
                None => return Err(abort_all(peers, format!("PE {pe} sent a malformed contribution to {label}"))),
            },
            Ok(other) => return Err(abort_all(peers, format!("PE {pe} sent {:?} during {label}", other.tag))),
            Err(e) => return Err(abort_all(peers, lost(pe, label, budget, &e))),
        };
        parts.push(part);
    }
    let mut payload = Vec::new();
    for part in &parts {
        payload.extend_from_slice(&(part.bytes.len() as u64).to_le_bytes());
        payload.extend_from_slice(&(part.fds.len() as u64).to_le_bytes());
        payload.extend_from_slice(&part.bytes);
    }
    let all_fds: Vec<BorrowedFd<'_>> = parts.iter().flat_map(|p| p.fds.iter().map(AsFd::as_fd)).collect();
    if all_fds.len() > frame::MAX_FDS {
        return Err(abort_all(peers, format!("{label} gathers {} descriptors; a message carries at most {}", all_fds.len(), frame::MAX_FDS)));
    }
    for (i, peer) in peers.iter().enumerate() {
        if let Err(e) = frame::send(peer, Tag::Gathered, &payload, &all_fds) {
            return Err(abort_all(peers, format!("PE {} left during {label}: {e}", i + 1)));
        }
    }
    Ok(parts)
}

/// Any other PE's side of a collective call: its contribution to PE 0, then every part.
fn gather_at_leaf(root: &UnixStream, pe: usize, label: &str, bytes: &[u8], fds: &[BorrowedFd<'_>], budget: Duration) -> Result<Vec<Part>, String> {
    let deadline = Instant::now() + budget + ANSWER_GRACE;
    // Where the send fails, PE 0 may have aborted the call and left already: its reason
    // is still waiting to be read.
    let sent = frame::send(root, Tag::Contribute, &contribution(label, bytes), fds);
    match frame::recv(root, deadline) {
        Ok(Frame { tag: Tag::Gathered, payload, fds }) => split_gathered(&payload, fds).ok_or_else(|| format!("PE {pe} got a malformed answer to {label} from PE 0")),
        Ok(Frame { tag: Tag::Abort, payload, .. }) => Err(String::from_utf8_lossy(&payload).into_owned()),
        Ok(other) => Err(format!("PE 0 answered {label} with {:?}", other.tag)),
        Err(e) => Err(lost(0, label, budget, sent.as_ref().err().unwrap_or(&e))),
    }
}

/// Every PE's part from PE 0's answer.
fn split_gathered(payload: &[u8], fds: Vec<OwnedFd>) -> Option<Vec<Part>> {
    let mut fds = fds.into_iter();
    let mut parts = Vec::new();
    let mut at = 0;
    while at < payload.len() {
        let word = |from: usize| payload.get(from..from + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let (len, nfds) = (usize::try_from(word(at)?).ok()?, usize::try_from(word(at + 8)?).ok()?);
        let bytes = payload.get(at + 16..at + 16 + len)?.to_vec();
        let part_fds: Vec<OwnedFd> = fds.by_ref().take(nfds).collect();
        if part_fds.len() != nfds {
            return None;
        }
        parts.push(Part { bytes, fds: part_fds });
        at += 16 + len;
    }
    fds.next().is_none().then_some(parts)
}

#[cfg(test)]
mod tests;
