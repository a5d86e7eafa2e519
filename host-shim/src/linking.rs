//! ferroccl's module joined with a user's device code at run time, by the driver's linker
//! (`cuLinkCreate` … `cuLinkComplete`): the user's kernels then call the device runtime's
//! C functions (`device_rt::cabi`) and run beside its own kernels in one module. Offline,
//! `ferroccl-link link` does the same with `nvlink`; both name their failures as
//! [`LinkFailure`] reads them from the linker's log.

use std::ffi::{CString, c_void};
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

pub use crate::error::LinkFailure;
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
