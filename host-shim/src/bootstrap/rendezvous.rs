//! Where the PEs of a bootstrap meet: a Unix socket at a path of the file system (what
//! `ferroccl run` and the PE launchers' variables name), or a name in Linux's abstract
//! socket namespace (what a communicator id carries: no file, nothing left behind, no
//! directory the processes must share).

use std::fmt;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::PathBuf;

use crate::{Error, Result};

/// A rendezvous socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// A socket file: PE 0 creates it (replacing a socket an earlier run left) and removes
    /// it once every PE has arrived.
    Path(PathBuf),
    /// A name in the abstract namespace of this host's network namespace (at most 107
    /// bytes): gone when PE 0 stops listening.
    Abstract(Vec<u8>),
}

/// PE 0's listening socket, and the socket file to remove when it is dropped.
pub(super) struct Listening {
    pub listener: UnixListener,
    file: Option<PathBuf>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        if let Some(path) = &self.file {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Rendezvous {
    /// PE 0 listens here.
    pub(super) fn listen(&self) -> Result<Listening> {
        match self {
            Self::Path(path) => {
                match std::fs::symlink_metadata(path) {
                    Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path).map_err(|e| self.failed("removing an old rendezvous socket", &e))?,
                    Ok(_) => return Err(Error::Bootstrap(format!("the rendezvous path {} exists and is not a socket", path.display()))),
                    Err(_) => {}
                }
                let listener = UnixListener::bind(path).map_err(|e| self.failed("listening", &e))?;
                Ok(Listening { listener, file: Some(path.clone()) })
            }
            Self::Abstract(_) => {
                let listener = UnixListener::bind_addr(&self.address()?).map_err(|e| self.failed("listening", &e))?;
                Ok(Listening { listener, file: None })
            }
        }
    }

    /// Any other PE connects here: `NotFound` or `ConnectionRefused` while PE 0 is not
    /// listening yet.
    pub(super) fn connect(&self) -> io::Result<UnixStream> {
        match self {
            Self::Path(path) => UnixStream::connect(path),
            Self::Abstract(_) => UnixStream::connect_addr(&self.address().map_err(io::Error::other)?),
        }
    }

    fn address(&self) -> Result<SocketAddr> {
        match self {
            Self::Path(path) => SocketAddr::from_pathname(path).map_err(|e| self.failed("naming", &e)),
            Self::Abstract(name) => SocketAddr::from_abstract_name(name).map_err(|e| self.failed("naming", &e)),
        }
    }

    /// A bootstrap error: `doing` at this rendezvous failed with `e`.
    pub(super) fn failed(&self, doing: &str, e: &io::Error) -> Error {
        Error::Bootstrap(format!("{doing} at the rendezvous {self}: {e}"))
    }
}

impl fmt::Display for Rendezvous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Path(path) => write!(f, "{}", path.display()),
            Self::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}
