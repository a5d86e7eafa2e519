//! The crate's one error: a result code with the text `ncclGetLastError` returns; and the
//! guard every exported function runs its body in (a panic becomes `ncclInternalError`,
//! never an unwind into C).

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::types::{INTERNAL_ERROR, INVALID_ARGUMENT, INVALID_USAGE, NcclResult, SUCCESS, result_of};

/// A failed call: its result code and why.
#[derive(Debug)]
pub struct Failure {
    pub result: NcclResult,
    pub why: String,
}

impl Failure {
    /// `ncclInvalidArgument`: the caller's argument is wrong.
    pub fn argument(why: impl Into<String>) -> Self {
        Self { result: INVALID_ARGUMENT, why: why.into() }
    }

    /// `ncclInvalidUsage`: a call out of order, or what ferroccl does not serve.
    pub fn usage(why: impl Into<String>) -> Self {
        Self { result: INVALID_USAGE, why: why.into() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for Failure {}

impl From<host_shim::Error> for Failure {
    fn from(e: host_shim::Error) -> Self {
        Self { result: result_of(e.kind()), why: e.to_string() }
    }
}

thread_local! {
    /// This thread's last failure's text (`ncclGetLastError`): valid until the thread's
    /// next failure.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `why` as this thread's last error.
fn record(why: &str) {
    let text = CString::new(why.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
}

/// This thread's last error's text (empty if none): valid until its next failure.
pub fn last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// Runs an exported function's `body`: its result code, its failure recorded (and logged)
/// as this thread's last error; a panic is `ncclInternalError`.
pub fn guarded(what: &str, body: impl FnOnce() -> Result<(), Failure>) -> NcclResult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(failure)) => {
            let why = format!("{what}: {failure}");
            log::warn!("ferroccl's NCCL: {why}");
            record(&why);
            failure.result
        }
        Err(_) => {
            record(&format!("{what}: ferroccl panicked (a bug)"));
            INTERNAL_ERROR
        }
    }
}
