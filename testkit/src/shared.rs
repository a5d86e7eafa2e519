//! Shared-memory files (`memfd`) mapped into a process: the host twin's stand-in for device
//! memory exported to other processes (a twin heap's, a twin communicator's connection
//! blocks), with the CPU's shared memory in place of NVLink.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use host_shim::{Error, Result};

/// A shared-memory file mapped here (page aligned), readable and writable; unmapped on
/// drop.
pub struct SharedMap {
    at: NonNull<u8>,
    len: usize,
}

// SAFETY: a shared mapping is plain memory, valid until drop, reachable from any thread;
// the twin's kernels reach it only through `arch`, the host only while no kernel runs.
unsafe impl Send for SharedMap {}
// SAFETY: as above.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps `len` bytes of the shared-memory file `fd`.
    pub fn map(fd: &OwnedFd, len: usize) -> Result<Self> {
        // SAFETY: a fresh shared mapping of `len` bytes of `fd`; the kernel picks the address.
        let at = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if at == libc::MAP_FAILED {
            return Err(Error::InvalidArgument(format!("mapping {len} bytes of a shared-memory file: {}", std::io::Error::last_os_error())));
        }
        Ok(Self { at: NonNull::new(at.cast()).ok_or_else(|| Error::InvalidArgument("mmap returned null".into()))?, len })
    }

    /// The mapping's first byte.
    pub fn base(&self) -> *mut u8 {
        self.at.as_ptr()
    }

    /// The mapping's bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: `mmap` refuses 0 bytes).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: the mapping `map` made; its owner drops it once no kernel uses it.
        unsafe { libc::munmap(self.at.as_ptr().cast(), self.len) };
    }
}

/// A new shared-memory file of `len` zero bytes, named `name` (in `/proc`'s listings).
pub fn shared_file(len: usize, name: &std::ffi::CStr) -> Result<OwnedFd> {
    let io = |what: &str| Error::InvalidArgument(format!("{what} for a shared-memory file: {}", std::io::Error::last_os_error()));
    // SAFETY: a zero-terminated name; the flags ask for close-on-exec.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io("memfd_create"));
    }
    // SAFETY: `memfd_create` just opened this descriptor for us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sizes the file we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(io("ftruncate"));
    }
    Ok(fd)
}
