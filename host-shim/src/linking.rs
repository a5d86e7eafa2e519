//! ferroccl's module joined with a user's device code at run time, by the driver's linker
//! (`cuLinkCreate` … `cuLinkComplete`): the user's kernels then call the device runtime's
//! C functions (`device_rt::cabi`) and run beside its own kernels in one module. Offline,
//! `ferroccl-link link` does the same with `nvlink`; both name their failures as
//! [`LinkFailure`] reads them from the linker's log.

use std::ffi::{CString, c_void};
use std::fmt;
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use crate::module::{Module, PTX};
use crate::{Error, Result};

/// One input of a link, as the driver's linker takes them.
#[derive(Clone, Copy, Debug)]
pub enum LinkInput<'a> {
    /// PTX text (compiled for the context's device as it links).
    Ptx(&'a str),
    /// A relocatable cubin (`ptxas -c`, `nvcc -cubin -rdc=true`).
    Cubin(&'a [u8]),
    /// A host object of relocatable device code (`nvcc -dc`): its embedded device code.
    Object(&'a [u8]),
    /// A fatbinary (`nvcc -fatbin -rdc=true`).
    Fatbin(&'a [u8]),
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

/// Bytes of the linker's error log.
const LOG_BYTES: usize = 16 << 10;

/// The link's state, destroyed when dropped.
struct LinkState(sys::CUlinkState);

impl Drop for LinkState {
    fn drop(&mut self) {
        // SAFETY: a state `cuLinkCreate` made and nothing else destroys; the cubin it
        // holds was copied (by `cuModuleLoadData`) before.
        unsafe { sys::cuLinkDestroy(self.0) };
    }
}

impl Module {
    /// ferroccl's module ([`PTX`], compiled for `ctx`'s device as it links: tens of
    /// seconds) linked with `inputs` (name, code) by the driver's linker and loaded into
    /// `ctx`: the inputs' kernels call the device runtime's C functions, and the runtime's
    /// own kernels are there too. A failure the log names is [`Error::Link`]; the kernels
    /// of the inputs must need no more local memory a thread than the runtime's (the stack
    /// is reserved for those).
    pub fn load_linked(ctx: &Arc<CudaContext>, inputs: &[(&str, LinkInput<'_>)]) -> Result<Self> {
        ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let mut log = vec![0u8; LOG_BYTES];
        let mut options = [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut values = [log.as_mut_ptr().cast::<c_void>(), LOG_BYTES as *mut c_void];
        let mut state = std::ptr::null_mut();
        // SAFETY: two options with their values (the log buffer outlives the state: it is
        // dropped after `link` below); the state is written on success.
        let created = unsafe { sys::cuLinkCreate_v2(options.len() as u32, options.as_mut_ptr(), values.as_mut_ptr(), &raw mut state) };
        created.result().map_err(Error::cuda("cuLinkCreate"))?;
        let link = LinkState(state);
        let ours = ("ferroccl_device.ptx", LinkInput::Ptx(PTX));
        for (name, input) in std::iter::once(&ours).chain(inputs) {
            let text;
            let (kind, bytes): (_, &[u8]) = match input {
                LinkInput::Ptx(ptx) => {
                    text = CString::new(*ptx).map_err(|_| Error::InvalidArgument(format!("{name}: PTX with a NUL byte")))?;
                    (sys::CUjitInputType::CU_JIT_INPUT_PTX, text.as_bytes_with_nul())
                }
                LinkInput::Cubin(b) => (sys::CUjitInputType::CU_JIT_INPUT_CUBIN, b),
                LinkInput::Object(b) => (sys::CUjitInputType::CU_JIT_INPUT_OBJECT, b),
                LinkInput::Fatbin(b) => (sys::CUjitInputType::CU_JIT_INPUT_FATBINARY, b),
            };
            let c_name = CString::new(*name).map_err(|_| Error::InvalidArgument(format!("an input named {name:?}")))?;
            // SAFETY: `bytes` is the input, alive for the call (the driver copies it); no
            // per-input options.
            let added = unsafe { sys::cuLinkAddData_v2(link.0, kind, bytes.as_ptr() as *mut c_void, bytes.len(), c_name.as_ptr(), 0, std::ptr::null_mut(), std::ptr::null_mut()) };
            if let Err(e) = added.result() {
                return Err(link_error(&log, e));
            }
        }
        let (mut cubin, mut size) = (std::ptr::null_mut(), 0usize);
        // SAFETY: the state holds every input; the cubin it returns lives until the state
        // is destroyed.
        let completed = unsafe { sys::cuLinkComplete(link.0, &raw mut cubin, &raw mut size) };
        if let Err(e) = completed.result() {
            return Err(link_error(&log, e));
        }
        // SAFETY: `size` bytes at `cubin`, owned by the state, which outlives this copy.
        let image = unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), size) }.to_vec();
        drop(link);
        Self::load_image(ctx, image)
    }
}

/// The error of a failed link step: what its log names, else the driver's error.
fn link_error(log: &[u8], e: cudarc::driver::DriverError) -> Error {
    let text = String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(log.len())]).into_owned();
    match LinkFailure::from_log(&text) {
        Some(failure) => Error::Link { failure, log: text },
        None => Error::Cuda { call: "cuLinkAddData / cuLinkComplete", source: e },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
