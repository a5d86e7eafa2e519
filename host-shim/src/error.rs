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
    /// Linking device code with ferroccl's module failed for a reason its log names
    /// ([`LinkFailure`]); the whole log is kept.
    Link { failure: LinkFailure, log: String },
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
    /// Another rank of a communicator across processes failed after it was built: its
    /// process ended without destroying its communicator, or it aborted (the reason names
    /// the rank). This rank's loop was aborted; every later call fails the same way.
    RankFailed(String),
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

/// What kind of failure an [`Error`] is ([`Error::kind`]): coarse classes to branch on
/// (retry, report, give up), each named against NCCL's `ncclResult_t`. More may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller's request is wrong: an argument (a buffer too short, on another device
    /// or outside its allocation, a bad rank, a malformed work item) or the order of calls
    /// (a loop started twice, a second stream, collective arguments that differ between
    /// PEs). NCCL: `ncclInvalidArgument`, `ncclInvalidUsage`. Nothing was enqueued where
    /// the host refused it; a work item the device refused stopped its loop.
    InvalidArgument,
    /// A valid request this machine, device or configuration cannot carry out: no peer
    /// path, no multicast, no multimem form, too few SMs or threads, a symmetric heap
    /// without room. NCCL reports these as `ncclInvalidUsage` (a configuration it refuses)
    /// or `ncclSystemError` (a missing resource).
    Unsupported,
    /// Work did not finish in time: a host wait ran out, or a wait inside the work loop
    /// ran past its spin budget (the loop stopped). NCCL has no result of its own for it
    /// (its kernels wait without bound; a watchdog above it aborts the communicator).
    Timeout,
    /// The work loop was aborted, or has left after a shutdown: nothing more runs on it.
    /// NCCL: the `ncclInvalidUsage` (or the async error) of a call on a communicator
    /// after `ncclCommAbort`/`ncclCommRevoke`.
    Aborted,
    /// Another rank or PE failed the call: it sent other counts, never arrived at, or
    /// left, a collective host call. NCCL: `ncclRemoteError`.
    PeerFailure,
    /// The CUDA driver failed: no driver, no device, or a driver call's error. NCCL:
    /// `ncclUnhandledCudaError`.
    Cuda,
    /// host-shim and the device runtime disagree (an unknown status from the loop): a bug
    /// or a corrupted runtime. NCCL: `ncclInternalError`.
    Internal,
}

impl Error {
    /// Wraps a driver error with the call that returned it:
    /// `result.map_err(Error::cuda("cuMemAlloc"))`.
    pub fn cuda(call: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |source| Error::Cuda { call, source }
    }

    /// The error's kind (see [`ErrorKind`] for what each is and its NCCL counterpart).
    pub fn kind(&self) -> ErrorKind {
        // Every variant named, no wildcard: a new variant does not compile until it has
        // its kind.
        match self {
            Self::InvalidArgument(_)
            | Self::BufferTooSmall { .. }
            | Self::WrongDevice { .. }
            | Self::NoSuchDevice { .. }
            | Self::InvalidState(_)
            | Self::BadWorkItem { .. }
            | Self::AlgorithmUnfit { .. }
            | Self::SymmetricMismatch { .. }
            | Self::Link { .. } => ErrorKind::InvalidArgument,
            Self::NoPeerAccess { .. }
            | Self::DeviceLimit(_)
            | Self::HeapExhausted { .. }
            | Self::MulticastUnsupported { .. }
            | Self::MultimemUnsupported { .. } => ErrorKind::Unsupported,
            Self::Timeout { .. } | Self::DeviceTimeout { .. } | Self::ShutdownIncomplete { .. } => ErrorKind::Timeout,
            Self::Aborted | Self::LoopClosed => ErrorKind::Aborted,
            Self::PeerMismatch { .. } | Self::Bootstrap(_) | Self::RankFailed(_) => ErrorKind::PeerFailure,
            Self::NoDriver | Self::NoDevice | Self::Cuda { .. } => ErrorKind::Cuda,
            Self::UnknownLoopStatus(_) => ErrorKind::Internal,
        }
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
            Self::Link { failure, .. } => write!(f, "linking with ferroccl's module: {failure}"),
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
                    Some(WaitSite::Application) => "the application's device function",
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
            Self::RankFailed(why) => write!(f, "the communicator stopped: {why}"),
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

/// Why a link failed, as the linker's log says it (the driver's and `nvlink`'s messages:
/// `Undefined reference to 'f' in 'a'`, `Multiple definition of 'f' in 'b', first
/// defined in 'a'`, `Input file 'x' arch does not match target 'sm_90a'`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkFailure {
    /// A call to a function that no input defines.
    Unresolved { symbol: String, referenced_in: String },
    /// A function that two inputs define.
    Duplicate { symbol: String, defined_in: String, first_defined_in: String },
    /// An input built for another architecture than the link's.
    ArchMismatch { input: String },
}

impl LinkFailure {
    /// The first failure `log` names, if it names one of these.
    pub fn from_log(log: &str) -> Option<Self> {
        log.lines().find_map(|line| {
            let q: Vec<String> = line.split('\'').skip(1).step_by(2).map(str::to_string).collect();
            if line.contains("Undefined reference to") && q.len() >= 2 {
                Some(Self::Unresolved { symbol: q[0].clone(), referenced_in: q[1].clone() })
            } else if line.contains("Multiple definition of") && q.len() >= 3 {
                Some(Self::Duplicate { symbol: q[0].clone(), defined_in: q[1].clone(), first_defined_in: q[2].clone() })
            } else if line.contains("arch does not match target") && !q.is_empty() {
                Some(Self::ArchMismatch { input: q[0].clone() })
            } else {
                None
            }
        })
    }
}

impl fmt::Display for LinkFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unresolved { symbol, referenced_in } => write!(f, "`{symbol}`, called in {referenced_in}, is defined by no input (is ferroccl's library among them?)"),
            Self::Duplicate { symbol, defined_in, first_defined_in } => write!(f, "`{symbol}` is defined twice: in {defined_in} and first in {first_defined_in}"),
            Self::ArchMismatch { input } => write!(f, "{input} was built for another architecture than the device's"),
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// A few representative variants of each kind (the match in `kind` names every
    /// variant, so the compiler checks that each has one).
    #[test]
    fn errors_map_to_their_kinds() {
        use cudarc::driver::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY;
        let cases = [
            (Error::InvalidArgument("x".into()), ErrorKind::InvalidArgument),
            (Error::BufferTooSmall { what: "the receive buffer", have: 1, want: 2 }, ErrorKind::InvalidArgument),
            (Error::WrongDevice { buffer: 1, rank: 0 }, ErrorKind::InvalidArgument),
            (Error::Link { failure: LinkFailure::ArchMismatch { input: "a.cubin".into() }, log: String::new() }, ErrorKind::InvalidArgument),
            (Error::BadWorkItem { reason: BadItem::NullPointer, seq: 0 }, ErrorKind::InvalidArgument),
            (Error::SymmetricMismatch { call: "malloc", args: vec![1, 2] }, ErrorKind::InvalidArgument),
            (Error::NoPeerAccess { from: 0, to: 1 }, ErrorKind::Unsupported),
            (Error::DeviceLimit("x".into()), ErrorKind::Unsupported),
            (Error::HeapExhausted { want: 2, largest_free: 1 }, ErrorKind::Unsupported),
            (Error::Timeout { what: "x".into(), after: Duration::from_secs(1) }, ErrorKind::Timeout),
            (Error::DeviceTimeout { site: Some(WaitSite::Flag), seq: 3 }, ErrorKind::Timeout),
            (Error::ShutdownIncomplete { outstanding: 2 }, ErrorKind::Timeout),
            (Error::Aborted, ErrorKind::Aborted),
            (Error::LoopClosed, ErrorKind::Aborted),
            (Error::PeerMismatch { seq: 4 }, ErrorKind::PeerFailure),
            (Error::Bootstrap("PE 1 left".into()), ErrorKind::PeerFailure),
            (Error::RankFailed("rank 1's process ended".into()), ErrorKind::PeerFailure),
            (Error::NoDriver, ErrorKind::Cuda),
            (Error::NoDevice, ErrorKind::Cuda),
            (Error::Cuda { call: "cuMemAlloc", source: DriverError(CUDA_ERROR_OUT_OF_MEMORY) }, ErrorKind::Cuda),
            (Error::UnknownLoopStatus(0xff), ErrorKind::Internal),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error}");
        }
    }

    /// What nvlink 13.0 printed for each failure (the linker's tests make them).
    #[test]
    fn failures_are_read_from_the_linkers_log() {
        let cases = [
            ("nvlink error   : Undefined reference to 'ferroccl_putmem' in 'fused.o'", LinkFailure::Unresolved { symbol: "ferroccl_putmem".into(), referenced_in: "fused.o".into() }),
            (
                "nvlink error   : Multiple definition of 'ferroccl_fence' in 'b.cubin', first defined in 'a.cubin'\nnvlink fatal   : merge_elf failed",
                LinkFailure::Duplicate { symbol: "ferroccl_fence".into(), defined_in: "b.cubin".into(), first_defined_in: "a.cubin".into() },
            ),
            ("nvlink fatal   : Input file 'rust80.cubin' arch does not match target 'sm_90a'", LinkFailure::ArchMismatch { input: "rust80.cubin".into() }),
        ];
        for (log, want) in cases {
            assert_eq!(LinkFailure::from_log(log), Some(want), "{log}");
        }
        assert_eq!(LinkFailure::from_log("ptxas fatal   : Unresolved extern function"), None);
    }
}
