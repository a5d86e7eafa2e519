//! host-shim's one error type.

use std::fmt;
use std::time::Duration;

use cudarc::driver::DriverError;
use device_rt::work::{BadItem, WaitSite};

/// Everything host-shim can fail with.
#[derive(Debug)]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`) could not be found or loaded.
    NoDriver,
    /// The driver is present but reports no CUDA device.
    NoDevice,
    /// A device ordinal past the number of devices.
    NoSuchDevice { ordinal: usize, count: usize },
    /// A CUDA driver call failed.
    Cuda { call: &'static str, source: DriverError },
    /// Device work did not finish in time; it may still be running.
    Timeout { what: String, after: Duration },
    /// A request the shim refuses before touching the device.
    InvalidArgument(String),
    /// A work item was refused: by the host before it was enqueued (`seq` 0), or by the
    /// device's work loop, which then stopped.
    BadWorkItem { reason: BadItem, seq: u64 },
    /// The work loop was aborted (by `abort()` from any thread).
    Aborted,
    /// A wait inside the work loop ran past its spin budget; the loop stopped.
    DeviceTimeout { site: Option<WaitSite>, seq: u64 },
    /// The work loop has left (after a Shutdown item or an error): nothing more runs.
    LoopClosed,
    /// A point-to-point peer sent a different count than this rank receives (or left
    /// data of an earlier operation behind); the loop stopped.
    PeerMismatch { seq: u64 },
    /// Shutdown did not complete in time; `outstanding` items had not completed.
    ShutdownIncomplete { outstanding: u64 },
}

/// host-shim's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps a driver error with the call that returned it:
    /// `result.map_err(Error::cuda("cuMemAlloc"))`.
    pub fn cuda(call: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |source| Error::Cuda { call, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDriver => f.write_str(
                "no CUDA driver: libcuda.so could not be loaded (is an NVIDIA driver installed, \
                 and on LD_LIBRARY_PATH?)",
            ),
            Self::NoDevice => f.write_str("no CUDA device: the driver is loaded but reports no GPU"),
            Self::NoSuchDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal}: the driver reports {count} device(s)")
            }
            Self::Cuda { call, source } => write!(f, "{call} failed: {source}"),
            Self::Timeout { what, after } => write!(f, "{what} did not finish within {after:?}"),
            Self::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Self::BadWorkItem { reason, seq: 0 } => write!(f, "work item refused: {}", reason.describe()),
            Self::BadWorkItem { reason, seq } => {
                write!(f, "work item {seq} refused by the device: {}; the work loop stopped", reason.describe())
            }
            Self::Aborted => f.write_str("the work loop was aborted"),
            Self::DeviceTimeout { site, seq } => write!(
                f,
                "a wait in the work loop ({}, item {seq}) ran past its spin budget; the work loop stopped",
                match site {
                    Some(WaitSite::Barrier) => "barrier across channels",
                    Some(WaitSite::Flag) => "waiting for a flag",
                    Some(WaitSite::RecvData) => "waiting for a peer's data",
                    Some(WaitSite::SendCredit) => "waiting for room in a peer's buffer",
                    None => "unknown wait",
                }
            ),
            Self::LoopClosed => f.write_str("the work loop has shut down"),
            Self::PeerMismatch { seq } => write!(
                f,
                "item {seq}: a peer sent a different element count than this rank receives; the work loop stopped"
            ),
            Self::ShutdownIncomplete { outstanding } => {
                write!(f, "shutdown did not complete in time: {outstanding} item(s) still outstanding")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Cuda { source, .. } => Some(source),
            _ => None,
        }
    }
}
