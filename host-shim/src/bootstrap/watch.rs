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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::frame::{self, Frame, Tag};
use super::{Bootstrap, Links};
use crate::{Error, Result};

/// How often the watcher looks at its connections and whether it should stop.
pub const TICK: Duration = Duration::from_millis(20);

/// How long a read of a message whose first byte has arrived may take.
const READ_BUDGET: Duration = Duration::from_secs(5);

/// This process's sending ends (copies of the bootstrap's connections: PE 0's to every
/// other PE, any other PE's to PE 0), shared by the watcher and [`Watch`]: the first word
/// said (a leave, or an abort) is the last. Sends are whole messages under the lock.
struct Outbox {
    /// `None` once this process has said its last word.
    streams: Mutex<Option<Vec<UnixStream>>>,
}

impl Outbox {
    /// Sends `tag` with `why` to every connection for which `to(i)` holds, as this
    /// process's last word; nothing where it has spoken already.
    fn last_word(&self, to: impl Fn(usize) -> bool, tag: Tag, why: &str) {
        let mut streams = self.streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (i, stream) in streams.take().into_iter().flatten().enumerate() {
            if to(i) {
                // Best effort: a peer that is gone needs no word.
                let _ = frame::send(&stream, tag, why.as_bytes(), &[]);
            }
        }
    }
}

/// This process's end of a watched bootstrap. Dropping it leaves: it tells PE 0 (PE 0
/// tells every other PE) before it returns, so a process that exits right after is no
/// failure. It blocks only for that send (a message of a few bytes).
pub struct Watch {
    aborter: WatchAbort,
}

/// Tells every other PE that this one stopped ([`Watch::abort`]), from any thread, also
/// after the [`Watch`] is gone (then nothing is told: the leave was the last word).
#[derive(Clone)]
pub struct WatchAbort {
    outbox: Arc<Outbox>,
    stop: Sender<()>,
}

impl std::fmt::Debug for WatchAbort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchAbort")
    }
}

impl WatchAbort {
    /// Tells every PE that this one stopped because of `why` (their `on_failure` runs
    /// with it), and stops the watch; nothing where this process has said its last word.
    pub fn abort(&self, why: &str) {
        self.outbox.last_word(|_| true, Tag::Abort, why);
        let _ = self.stop.send(());
    }
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
        let links = bootstrap.links;
        let streams = match &links {
            Links::Alone => Ok(Vec::new()),
            Links::Root { peers } => peers.iter().map(UnixStream::try_clone).collect::<std::io::Result<_>>(),
            Links::Leaf(root) => root.try_clone().map(|r| vec![r]),
        }
        .map_err(|e| Error::Bootstrap(format!("copying a bootstrap connection to watch the other {member}s: {e}")))?;
        let outbox = Arc::new(Outbox { streams: Mutex::new(Some(streams)) });
        let (stop, stopped) = mpsc::channel();
        let watcher = outbox.clone();
        std::thread::Builder::new()
            .name("ferroccl-watch".into())
            .spawn(move || {
                let failure = match links {
                    Links::Alone => None,
                    Links::Root { peers } => watch_root(&peers, member, &watcher, &stopped),
                    Links::Leaf(root) => watch_leaf(&root, member, &stopped),
                };
                if let Some(why) = failure {
                    on_failure(why);
                }
            })
            .map_err(|e| Error::Bootstrap(format!("no thread to watch the other {member}s: {e}")))?;
        Ok(Self { aborter: WatchAbort { outbox, stop } })
    }

    /// Tells every PE that this one stopped because of `why` (their `on_failure` runs
    /// with it), and stops watching.
    pub fn abort(&self, why: &str) {
        self.aborter.abort(why);
    }

    /// A handle that does [`Watch::abort`] from any thread.
    pub fn abort_handle(&self) -> WatchAbort {
        self.aborter.clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.aborter.outbox.last_word(|_| true, Tag::Leave, "");
        let _ = self.aborter.stop.send(());
    }
}

/// Whether this process asked the watcher to stop (or is gone).
fn stopped(stop: &Receiver<()>) -> bool {
    !matches!(stop.try_recv(), Err(TryRecvError::Empty))
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

/// PE 0: hears every other PE; tells all of them when one fails.
fn watch_root(peers: &[UnixStream], member: &str, outbox: &Outbox, stop: &Receiver<()>) -> Option<String> {
    let mut live: Vec<bool> = vec![true; peers.len()];
    while !stopped(stop) {
        let watched: Vec<(usize, &UnixStream)> = peers.iter().enumerate().filter(|(i, _)| live[*i]).collect();
        if watched.is_empty() {
            // Every other PE left: nothing more to hear.
            return None;
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
                    outbox.last_word(|j| live[j], Tag::Abort, &why);
                    return Some(why);
                }
            }
        }
    }
    None
}

/// Any other PE: hears PE 0.
fn watch_leaf(root: &UnixStream, member: &str, stop: &Receiver<()>) -> Option<String> {
    while !stopped(stop) {
        if readable(&[root])[0] {
            return heard(root, 0, member);
        }
    }
    None
}
