//! The embedded PTX module and its kernels.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, sys};
use cudarc::nvrtc::Ptx;

use crate::{Error, Result};

/// ferroccl's whole device side, as built from `ptx/kernels` by host-shim's build script.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/ferroccl.ptx"));

/// The `.entry` of the persistent work loop kernel in [`PTX`].
const WORK_LOOP_ENTRY: &str = "ferroccl_work_loop";

/// 32-bit registers in one SM's register file on sm_90, the most one CTA may use.
const REGISTERS_PER_SM: u32 = 65536;

/// Threads per CTA that fit at any register use (CUDA caps a thread at 255 registers).
const THREADS_AT_ANY_REGISTER_USE: u32 = REGISTERS_PER_SM / 256;

/// The PTX module loaded into one context.
#[derive(Clone, Debug)]
pub struct Module {
    inner: Arc<CudaModule>,
}

impl Module {
    /// JIT-compiles and loads [`PTX`] into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        Self::load_src(ctx, PTX)
    }

    /// As [`Module::load`], for a work loop of `threads` threads per CTA: above 256, the
    /// work loop's entry is capped at `65536 / threads` registers (rounded down to a
    /// multiple of 8: 128 for 512 threads) so that a CTA fits in one SM's register file.
    pub fn load_for_threads(ctx: &Arc<CudaContext>, threads: u32) -> Result<Self> {
        match work_loop_max_registers(threads) {
            None => Self::load(ctx),
            Some(registers) => {
                log::info!("module: capping the work loop at {registers} registers for {threads} threads");
                Self::load_src(ctx, with_maxnreg(PTX, WORK_LOOP_ENTRY, registers)?)
            }
        }
    }

    fn load_src(ctx: &Arc<CudaContext>, src: impl Into<String>) -> Result<Self> {
        let inner = ctx.load_module(Ptx::from_src(src)).map_err(Error::cuda("cuModuleLoadData"))?;
        Ok(Self { inner })
    }

    /// The kernel named `name` (an `extern "gpu-kernel"` function of `ptx/kernels`).
    pub fn kernel(&self, name: &str) -> Result<CudaFunction> {
        self.inner.load_function(name).map_err(Error::cuda("cuModuleGetFunction"))
    }
}

/// The `.maxnreg` that lets a work loop CTA of `threads` threads fit in one SM's register
/// file, or `None` where any register use fits.
fn work_loop_max_registers(threads: u32) -> Option<u32> {
    (threads > THREADS_AT_ANY_REGISTER_USE).then(|| REGISTERS_PER_SM / threads / 8 * 8)
}

/// `ptx` with the performance directive `.maxnreg max_registers` on its `.entry` named
/// `entry`, which must appear exactly once and carry no `.maxnreg` yet.
pub fn with_maxnreg(ptx: &str, entry: &str, max_registers: u32) -> Result<String> {
    let bad = |why: String| Err(Error::InvalidArgument(why));
    if max_registers == 0 {
        return bad(format!("`.maxnreg 0` on PTX entry `{entry}`"));
    }
    // Each `.entry entry` followed by its parameter list: where that list's `(` is.
    let opens: Vec<usize> = ptx
        .match_indices(".entry ")
        .filter_map(|(at, directive)| {
            let after_name = ptx[at + directive.len()..].strip_prefix(entry)?;
            let params = after_name.trim_start();
            params.starts_with('(').then(|| ptx.len() - params.len())
        })
        .collect();
    let [open] = opens[..] else {
        return bad(format!("PTX entry `{entry}` appears {} times, not once", opens.len()));
    };
    let Some(close) = ptx[open..].find(')').map(|at| open + at + 1) else {
        return bad(format!("PTX entry `{entry}` has no end to its parameter list"));
    };
    let directives = ptx[close..].split('{').next().unwrap_or_default();
    if directives.contains(".maxnreg") {
        return bad(format!("PTX entry `{entry}` already has a `.maxnreg`"));
    }
    Ok(format!("{} .maxnreg {max_registers}{}", &ptx[..close], &ptx[close..]))
}

/// Lets `kernel` be launched with up to `bytes` of dynamic shared memory (above 48 KiB a
/// kernel must opt in).
pub fn allow_dynamic_smem(kernel: &CudaFunction, bytes: u32) -> Result<()> {
    let bytes = i32::try_from(bytes).map_err(|_| Error::InvalidArgument(format!("{bytes} bytes of shared memory")))?;
    kernel
        .set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)
        .map_err(Error::cuda("cuFuncSetAttribute"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = ".version 8.0\n.target sm_90\n.visible .entry loop_long()\n{\n\tret;\n}\n\
                        .visible .entry loop(\n\t.param .u64 loop_param_0\n)\n{\n\tret;\n}\n";

    #[test]
    fn maxnreg_goes_after_the_named_entrys_parameters() {
        let patched = with_maxnreg(TINY, "loop", 128).unwrap();
        assert_eq!(patched, TINY.replace("loop_param_0\n)\n", "loop_param_0\n) .maxnreg 128\n"));
        let patched = with_maxnreg(TINY, "loop_long", 64).unwrap();
        assert_eq!(patched, TINY.replace("loop_long()", "loop_long() .maxnreg 64"));
    }

    #[test]
    fn maxnreg_needs_the_entry_exactly_once_and_uncapped() {
        for (ptx, entry, registers) in [
            (TINY, "lo", 128),
            (TINY, "loop", 0),
            (&*TINY.repeat(2), "loop", 128),
            (&*with_maxnreg(TINY, "loop", 128).unwrap(), "loop", 64),
        ] {
            assert!(matches!(with_maxnreg(ptx, entry, registers), Err(Error::InvalidArgument(_))), "{entry} {registers}");
        }
    }

    #[test]
    fn work_loop_registers_fill_one_register_file() {
        assert_eq!(work_loop_max_registers(256), None);
        assert_eq!(work_loop_max_registers(288), Some(224));
        assert_eq!(work_loop_max_registers(384), Some(168));
        assert_eq!(work_loop_max_registers(512), Some(128));
    }

    #[test]
    fn the_embedded_ptx_has_the_work_loop_entry_once() {
        let patched = with_maxnreg(PTX, WORK_LOOP_ENTRY, 128).unwrap();
        assert_eq!(patched.matches(".maxnreg").count(), PTX.matches(".maxnreg").count() + 1);
    }
}
