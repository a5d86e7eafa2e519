//! Watching the PEs of a bootstrap once its collective calls are done (a communicator
//! across processes is built): a thread per process keeps the bootstrap's connections and
//! learns, within [`TICK`], that a PE's process ended without leaving, or that a PE
//! stopped (aborted), and tells this process ([`Watch::new`]'s `on_failure`) why, naming
//! the PE. PE 0 hears every other PE and tells all of them; every other PE hears PE 0.
//!
//! A PE leaves on purpose by dropping its [`Watch`] (its communicator is destroyed): its
//! connection's end is then no failure. Once PE 0 has left, the others watch no more (a
//! PE that dies later is found by the spin budget of the waits on it instead).

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use super::frame::{self, Frame, Tag};
use super::{Bootstrap, Links};
use crate::{Error, Result};

/// How often the watcher looks at its connections and at this process's requests.
pub const TICK: Duration = Duration::from_millis(20);

/// How long a read of a message whose first byte has arrived may take.
const READ_BUDGET: Duration = Duration::from_secs(5);

/// What this process asks of its watcher.
enum Request {
    /// Tell every PE that this one stopped, and why.
    Abort(String),
    /// Leave on purpose.
    Leave,
}

/// This process's end of a watched bootstrap. Dropping it leaves (never blocks: the
/// watcher thread says so to PE 0, or PE 0's to everyone, and ends).
pub struct Watch {
    requests: Sender<Request>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Watch {
    /// Watches `bootstrap`'s PEs on a thread of its own; `on_failure(why)` runs on that
    /// thread, at most once, when a PE (named in `why`) is gone or stopped. `member` is what
    /// `why` calls a PE ("rank").
    pub fn new(bootstrap: Bootstrap, member: &'static str, on_failure: Box<dyn FnOnce(String) + Send>) -> Result<Self> {
        if let Some(why) = bootstrap.failed {
            return Err(Error::Bootstrap(why));
        }
        let (requests, incoming) = mpsc::channel();
        let links = bootstrap.links;
        std::thread::Builder::new()
            .name("ferroccl-watch".into())
            .spawn(move || {
                let failure = match links {
                    Links::Alone => watch_alone(&incoming),
                    Links::Root { peers } => watch_root(&peers, member, &incoming),
                    Links::Leaf(root) => watch_leaf(&root, member, &incoming),
                };
                if let Some(why) = failure {
                    on_failure(why);
                }
            })
            .map_err(|e| Error::Bootstrap(format!("no thread to watch the other {member}s: {e}")))?;
        Ok(Self { requests })
    }

    /// Tells every PE that this one stopped because of `why` (their `on_failure` runs
    /// with it). Never blocks.
    pub fn abort(&self, why: String) {
        let _ = self.requests.send(Request::Abort(why));
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.requests.send(Request::Leave);
    }
}

/// The only PE: nothing to hear, only to wait for its leave.
fn watch_alone(incoming: &Receiver<Request>) -> Option<String> {
    let _ = incoming.recv();
    None
}

/// What this process asked, if anything: `Some` ends the watch.
fn asked(incoming: &Receiver<Request>) -> Option<Request> {
    match incoming.try_recv() {
        Ok(request) => Some(request),
        Err(TryRecvError::Empty) => None,
        Err(TryRecvError::Disconnected) => Some(Request::Leave),
    }
}

/// Which of `streams` have something to read (or have ended), waiting up to [`TICK`].
fn readable(streams: &[&UnixStream]) -> Vec<bool> {
    let mut fds: Vec<libc::pollfd> = streams.iter().map(|s| libc::pollfd { fd: s.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    // SAFETY: `fds` holds `fds.len()` valid pollfd entries for the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, TICK.as_millis() as i32) };
    if n <= 0 {
        return vec![false; streams.len()];
    }
    fds.iter().map(|f| f.revents != 0).collect()
}

/// What a readable connection of PE `pe` said: `None` a leave, else the failure.
fn heard(stream: &UnixStream, pe: usize, member: &str) -> Option<String> {
    match frame::recv(stream, Instant::now() + READ_BUDGET) {
        Ok(Frame { tag: Tag::Leave, .. }) => None,
        Ok(Frame { tag: Tag::Abort, payload, .. }) => Some(String::from_utf8_lossy(&payload).into_owned()),
        Ok(other) => Some(format!("{member} {pe} sent {:?} to a communicator already built", other.tag)),
        Err(e) => Some(format!("{member} {pe}'s process ended (or closed its connection: {e}) without destroying its communicator")),
    }
}

/// PE 0: hears every other PE; tells all of them when one fails or when this one aborts
/// or leaves.
fn watch_root(peers: &[UnixStream], member: &str, incoming: &Receiver<Request>) -> Option<String> {
    let mut live: Vec<bool> = vec![true; peers.len()];
    let tell = |live: &[bool], tag: Tag, why: &str| {
        for (peer, _) in peers.iter().zip(live).filter(|(_, l)| **l) {
            let _ = frame::send(peer, tag, why.as_bytes(), &[]);
        }
    };
    loop {
        match asked(incoming) {
            Some(Request::Leave) => {
                tell(&live, Tag::Leave, "");
                return None;
            }
            Some(Request::Abort(why)) => {
                tell(&live, Tag::Abort, &why);
                return None;
            }
            None => {}
        }
        let watched: Vec<(usize, &UnixStream)> = peers.iter().enumerate().filter(|(i, _)| live[*i]).collect();
        if watched.is_empty() {
            // Every other PE left: wait for this one's own leave or abort.
            return match incoming.recv() {
                Ok(Request::Abort(_) | Request::Leave) | Err(_) => None,
            };
        }
        let ready = readable(&watched.iter().map(|(_, s)| *s).collect::<Vec<_>>());
        for ((i, stream), ready) in watched.into_iter().zip(ready) {
            if !ready {
                continue;
            }
            match heard(stream, i + 1, member) {
                None => live[i] = false,
                Some(why) => {
                    live[i] = false;
                    tell(&live, Tag::Abort, &why);
                    return Some(why);
                }
            }
        }
    }
}

/// Any other PE: hears PE 0; tells it when this one aborts or leaves.
fn watch_leaf(root: &UnixStream, member: &str, incoming: &Receiver<Request>) -> Option<String> {
    loop {
        match asked(incoming) {
            Some(Request::Leave) => {
                let _ = frame::send(root, Tag::Leave, &[], &[]);
                return None;
            }
            Some(Request::Abort(why)) => {
                let _ = frame::send(root, Tag::Abort, why.as_bytes(), &[]);
                return None;
            }
            None => {}
        }
        if readable(&[root])[0] {
            return heard(root, 0, member);
        }
    }
}
