//! host-shim's one error type.

use std::fmt;
use std::time::Duration;

use cudarc::driver::DriverError;
use device_rt::abi::WaitSite;
use device_rt::algo::{AlgorithmChoice, CollFunction, Unfit};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::BadItem;

/// Everything host-shim can fail with: one variant per kind of failure. More may come.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`) could not be found or loaded.
    NoDriver,
    /// The driver is present but reports no CUDA device.
    NoDevice,
    /// A device ordinal past the number of devices.
    NoSuchDevice { ordinal: usize, count: usize },
    /// Device `from` cannot reach device `to`'s memory (no peer path).
    NoPeerAccess { from: usize, to: usize },
    /// A CUDA driver call failed.
    Cuda { call: &'static str, source: DriverError },
    /// Device work did not finish in time; it may still be running.
    Timeout { what: String, after: Duration },
    /// A request the shim refuses before touching the device.
    InvalidArgument(String),
    /// A buffer holds fewer elements than the call needs; nothing was enqueued.
    BufferTooSmall { what: &'static str, have: usize, want: usize },
    /// A buffer in device `buffer`'s memory given to a rank of device `rank`: a rank
    /// works on its own device's memory only (peer access would make it "work", slowly,
    /// and hide the mistake); nothing was enqueued.
    WrongDevice { buffer: usize, rank: usize },
    /// A request the device cannot carry out (too few SMs, too many threads for the
    /// kernel, channels that cannot all be resident); nothing was started.
    DeviceLimit(String),
    /// A call out of order for the object's state (starting a loop twice, attaching a
    /// communicator to a running loop).
    InvalidState(&'static str),
    /// The work loop's stream-ordered path already serves another stream.
    StreamInUse,
    /// The work loop reported a status this host does not know (a newer or corrupted
    /// device runtime); the loop stopped.
    UnknownLoopStatus(u64),
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
    /// The communicator forces an algorithm that cannot run this call; nothing was
    /// enqueued.
    AlgorithmUnfit { algorithm: AlgorithmChoice, function: CollFunction, why: Unfit },
    /// A collective symmetric-heap call (`malloc`, `free`) got different arguments from
    /// different PEs (`args[pe]`): the error of every PE; the heap is unchanged.
    SymmetricMismatch { call: &'static str, args: Vec<u64> },
    /// The symmetric heap has no free range of `want` bytes (the largest is
    /// `largest_free`); the heap is unchanged.
    HeapExhausted { want: u64, largest_free: u64 },
    /// The PEs of several processes could not meet or finish a collective host call: a
    /// PE never arrived, left, or was at another call (the reason names it). Every PE
    /// gets this error; the bootstrap refuses every later call.
    Bootstrap(String),
    /// Device `ordinal` does not support NVLink multicast
    /// (`CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`): no multicast object was created.
    MulticastUnsupported { ordinal: usize },
    /// NVLS through hardware multicast cannot run `function` on `count` elements of
    /// `dtype` with `op`: `multimem.ld_reduce` has no form for the pair (NCCL's
    /// BigPackSize table), 1-byte elements (all-gather), or 2-byte elements that do not
    /// fill whole 16-byte packs.
    /// The software twin runs it.
    MultimemUnsupported { function: CollFunction, dtype: DataType, op: RedOpKind, count: u64 },
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
            Self::NoPeerAccess { from, to } => write!(f, "device {from} cannot access device {to}'s memory (no peer path)"),
            Self::Cuda { call, source } => write!(f, "{call} failed: {source}"),
            Self::Timeout { what, after } => write!(f, "{what} did not finish within {after:?}"),
            Self::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Self::BufferTooSmall { what, have, want } => write!(f, "{what} holds {have} elements; the call needs {want}"),
            Self::WrongDevice { buffer, rank } => {
                write!(f, "a buffer on device {buffer} was given to a rank on device {rank}; a rank works on its own device's memory")
            }
            Self::DeviceLimit(why) => write!(f, "beyond the device's limits: {why}"),
            Self::InvalidState(why) => write!(f, "invalid state: {why}"),
            Self::StreamInUse => f.write_str("this work loop's stream-ordered path already serves another stream"),
            Self::UnknownLoopStatus(status) => write!(f, "the work loop stopped with an unknown status {status:#x}"),
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
                    Some(WaitSite::MailboxSubmit) => "a stream-ordered item waiting for the loop to run it",
                    Some(WaitSite::ShotFlag) => "a one-shot/two-shot collective waiting for a peer's flag",
                    Some(WaitSite::ShmemBarrier) => "a symmetric-heap barrier waiting for the other PEs",
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
            Self::SymmetricMismatch { call, args } => {
                write!(f, "shmem {call} is collective, but the PEs passed different arguments ({args:?} by PE); nothing changed on any PE")
            }
            Self::HeapExhausted { want, largest_free } => {
                write!(f, "the symmetric heap has no free {want} bytes (largest free range: {largest_free} bytes); nothing changed")
            }
            Self::Bootstrap(why) => write!(f, "bootstrap of the PEs failed: {why}"),
            Self::MulticastUnsupported { ordinal } => {
                write!(f, "device {ordinal} does not support NVLink multicast; no multicast object was created")
            }
            Self::MultimemUnsupported { function, dtype, op, count } => write!(
                f,
                "hardware NVLS cannot run {} on {count} {} with {}: multimem has no form for it (NCCL's BigPackSize table; 1-byte all-gathers none, 2-byte elements in whole 16-byte packs only); nothing was enqueued",
                function.name(),
                dtype.name(),
                op.name()
            ),
            Self::AlgorithmUnfit { algorithm, function, why } => {
                write!(f, "the communicator forces {}, which cannot run this {}: ", algorithm.name(), function.name())?;
                match why {
                    Unfit::NoStaging => f.write_str("the communicator has no staging buffers (it needs 2 to 8 ranks and CommConfig::staging_bytes)"),
                    Unfit::NotForFunction => write!(f, "{} is not an algorithm of {}", algorithm.name(), function.name()),
                    Unfit::NoNvls => f.write_str("the communicator has no NVLS connections (NVLS needs 2 to 8 ranks and at least 192 threads a channel)"),
                    Unfit::TooLarge { bytes, capacity } => write!(
                        f,
                        "it stages {bytes} bytes per rank and the staging buffers hold {capacity} (raise CommConfig::staging_bytes, or let the device choose)"
                    ),
                }
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
