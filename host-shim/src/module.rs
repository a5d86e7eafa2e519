//! The embedded PTX module, its prebuilt SASS, and its kernels.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, sys};
use cudarc::nvrtc::Ptx;
use ferroccl_ptx_builder::sass::{SASS_ARCH, SASS_CC, WORK_LOOP_ENTRY, with_maxnreg, work_loop_max_registers};

use crate::{Error, Result};

/// ferroccl's whole device side, as built from `ptx/kernels` by host-shim's build script.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/ferroccl.ptx"));

/// The SASS that host-shim's build script compiled from [`PTX`] with ptxas: `IMAGES`
/// holds one sm_90a cubin per work-loop register cap (`None`: the unpatched module;
/// `Some(128)`: a 512-thread loop), `MISSING` says why there are
/// none where ptxas was not found, and `PTXAS_GIVEN` whether `$FERROCCL_PTXAS` named one.
pub mod sass {
    include!(concat!(env!("OUT_DIR"), "/sass.rs"));
}

/// The module loaded into one context.
#[derive(Clone, Debug)]
pub struct Module {
    inner: Arc<CudaModule>,
}

impl Module {
    /// Loads the module into `ctx`: the prebuilt SASS where the device runs it (compute
    /// capability 9.0), else the JIT-compiled [`PTX`].
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        Self::load_capped(ctx, None)
    }

    /// As [`Module::load`], for a work loop of `threads` threads per CTA: above 256, the
    /// work loop's entry is capped at `65536 / threads` registers (rounded down to a
    /// multiple of 8: 128 for 512 threads) so that a CTA fits in one SM's register file.
    /// A cap with no prebuilt SASS (only 512 threads has one) JIT-compiles the PTX.
    pub fn load_for_threads(ctx: &Arc<CudaContext>, threads: u32) -> Result<Self> {
        let cap = work_loop_max_registers(threads);
        if let Some(registers) = cap {
            log::info!("module: capping the work loop at {registers} registers for {threads} threads");
        }
        Self::load_capped(ctx, cap)
    }

    fn load_capped(ctx: &Arc<CudaContext>, cap: Option<u32>) -> Result<Self> {
        let cc = ctx.compute_capability().map_err(Error::cuda("cuDeviceGetAttribute"))?;
        let start = Instant::now();
        match choose(cc, cap, sass::IMAGES, sass::MISSING) {
            Image::Sass(cubin) => match ctx.load_module(Ptx::from_binary(cubin.to_vec())) {
                Ok(inner) => {
                    log::info!(
                        "module: loaded the {SASS_ARCH} SASS ({}, {} bytes) on compute capability {}.{} in {:.3} s",
                        describe(cap),
                        cubin.len(),
                        cc.0,
                        cc.1,
                        start.elapsed().as_secs_f64()
                    );
                    return Self::reserving_stack(ctx, inner);
                }
                Err(e) => log::warn!("module: the {SASS_ARCH} SASS ({}) did not load ({e}); JIT-compiling the PTX instead", describe(cap)),
            },
            Image::Ptx(why) => log::warn!("module: JIT-compiling the PTX ({}; {why}): this takes tens of seconds", describe(cap)),
        }
        let src = match cap {
            None => PTX.to_owned(),
            Some(registers) => with_maxnreg(PTX, WORK_LOOP_ENTRY, registers).map_err(Error::InvalidArgument)?,
        };
        let bytes = src.len();
        let inner = ctx.load_module(Ptx::from_src(src)).map_err(Error::cuda("cuModuleLoadData"))?;
        log::info!(
            "module: JIT-compiled and loaded the PTX ({}, {bytes} bytes) on compute capability {}.{} in {:.1} s",
            describe(cap),
            cc.0,
            cc.1,
            start.elapsed().as_secs_f64()
        );
        Self::reserving_stack(ctx, inner)
    }

    /// A module that holds ferroccl's (a cubin `ferroccl-link link` made of the user's
    /// device code and ferroccl's library, or `cuLinkComplete`'s), loaded into `ctx`, with
    /// the stack reserved for the runtime's kernels as [`Module::load`] does.
    pub fn load_image(ctx: &Arc<CudaContext>, image: Vec<u8>) -> Result<Self> {
        let inner = ctx.load_module(Ptx::from_binary(image)).map_err(Error::cuda("cuModuleLoadData"))?;
        Self::reserving_stack(ctx, inner)
    }

    /// The loaded module, once `ctx`'s per-thread stack (`CU_LIMIT_STACK_SIZE`) holds the
    /// local memory of every kernel in it. The driver otherwise grows the stack at the
    /// launch of a kernel that needs more than any before, and growing it waits for every
    /// kernel running in the context: beside a persistent loop, that launch never returns.
    /// On an H200 the first stream-ordered call to a symmetric heap's loop
    /// (its call kernel needs more than the heap loop's kernel) hung so. Kernels of other
    /// modules launched while a loop runs must need no more than this either.
    fn reserving_stack(ctx: &Arc<CudaContext>, inner: Arc<CudaModule>) -> Result<Self> {
        let module = Self { inner };
        let mut most = 0;
        for name in entries(PTX) {
            let bytes = module.kernel(name)?.get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES).map_err(Error::cuda("cuFuncGetAttribute"))?;
            most = most.max(usize::try_from(bytes).unwrap_or(0));
        }
        let limit = sys::CUlimit::CU_LIMIT_STACK_SIZE;
        let now = ctx.get_limit(limit).map_err(Error::cuda("cuCtxGetLimit"))?;
        if most > now {
            ctx.set_limit(limit, most).map_err(Error::cuda("cuCtxSetLimit"))?;
            log::debug!("module: per-thread stack raised from {now} to {most} bytes, the most local memory of its kernels");
        }
        Ok(module)
    }

    /// The kernel named `name` (an `extern "gpu-kernel"` function of `ptx/kernels`).
    pub fn kernel(&self, name: &str) -> Result<CudaFunction> {
        self.inner.load_function(name).map_err(Error::cuda("cuModuleGetFunction"))
    }
}

/// The names of the kernels of a PTX module: its `.entry` directives.
fn entries(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines().filter_map(|line| {
        let rest = line.split_once(".entry ")?.1;
        Some(rest.split('(').next()?.trim()).filter(|name| !name.is_empty())
    })
}

/// What a load of the module for one work-loop register cap uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Image {
    /// The prebuilt cubin for that cap.
    Sass(&'static [u8]),
    /// The PTX, JIT-compiled by the driver, for this reason.
    Ptx(Jit),
}

/// Why a load JIT-compiles the PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Jit {
    /// The build made no SASS (the build script's reason).
    NotBuilt(&'static str),
    /// The device's compute capability runs no sm_90a SASS (only 9.0 does).
    Device(i32, i32),
    /// No cubin was built for this cap.
    Cap(u32),
}

impl std::fmt::Display for Jit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotBuilt(why) => write!(f, "the build made no SASS: {why}"),
            Self::Device(major, minor) => write!(f, "compute capability {major}.{minor} runs no {SASS_ARCH} SASS"),
            Self::Cap(registers) => {
                let built: Vec<_> = sass::IMAGES.iter().filter_map(|(cap, _)| *cap).collect();
                write!(f, "no SASS was built for a work loop capped at {registers} registers (built for caps {built:?})")
            }
        }
    }
}

/// The image for a device of compute capability `cc` and a work loop capped at `cap`
/// registers (`None`: uncapped), given the cubins `images` and the reason `missing`
/// there are none.
fn choose(cc: (i32, i32), cap: Option<u32>, images: &'static [(Option<u32>, &'static [u8])], missing: Option<&'static str>) -> Image {
    if images.is_empty() {
        return Image::Ptx(Jit::NotBuilt(missing.unwrap_or("no reason recorded")));
    }
    if cc != SASS_CC {
        return Image::Ptx(Jit::Device(cc.0, cc.1));
    }
    match images.iter().find(|(image_cap, _)| *image_cap == cap) {
        Some((_, cubin)) => Image::Sass(cubin),
        None => Image::Ptx(Jit::Cap(cap.unwrap_or(0))),
    }
}

/// Whether a Hopper device loads prebuilt SASS for a work loop capped at `cap` (`None`:
/// uncapped) rather than JIT-compiling the PTX.
#[cfg(test)]
pub(crate) fn has_sass(cap: Option<u32>) -> bool {
    matches!(choose(SASS_CC, cap, sass::IMAGES, sass::MISSING), Image::Sass(_))
}

/// The module a cap selects, in words.
fn describe(cap: Option<u32>) -> String {
    match cap {
        None => "work loop uncapped".into(),
        Some(registers) => format!("work loop capped at {registers} registers"),
    }
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

    static WHOLE: [u8; 1] = [1];
    static CAPPED: [u8; 1] = [2];
    static IMAGES: [(Option<u32>, &[u8]); 2] = [(None, &WHOLE), (Some(128), &CAPPED)];

    #[test]
    fn every_kernel_of_the_module_is_found_for_the_stack_reservation() {
        let made = ".visible .entry first(\n\t.param .u64 a\n)\n.entry second(.param .u32 b)\n.func helper(\n";
        assert_eq!(entries(made).collect::<Vec<_>>(), ["first", "second"]);
        let names: Vec<&str> = entries(PTX).collect();
        for kernel in ["ferroccl_work_loop", "ferroccl_shmem_work_loop", "ferroccl_call_kernel", "ferroccl_call_kernel_alone"] {
            assert!(names.contains(&kernel), "{kernel} not among {names:?}");
        }
        assert_eq!(names.len(), PTX.matches(".entry ").count());
    }

    #[test]
    fn hopper_loads_the_cubin_of_its_cap_and_everything_else_jits() {
        assert_eq!(choose((9, 0), None, &IMAGES, None), Image::Sass(&WHOLE));
        assert_eq!(choose((9, 0), Some(128), &IMAGES, None), Image::Sass(&CAPPED));
        assert_eq!(choose((9, 0), Some(168), &IMAGES, None), Image::Ptx(Jit::Cap(168)));
        assert_eq!(choose((9, 0), Some(128), &IMAGES[..1], None), Image::Ptx(Jit::Cap(128)));
        for cc in [(8, 0), (8, 9), (9, 1), (10, 0), (12, 0)] {
            assert_eq!(choose(cc, None, &IMAGES, None), Image::Ptx(Jit::Device(cc.0, cc.1)));
            assert_eq!(choose(cc, Some(128), &IMAGES, None), Image::Ptx(Jit::Device(cc.0, cc.1)));
        }
        assert_eq!(choose((9, 0), None, &[], Some("no ptxas")), Image::Ptx(Jit::NotBuilt("no ptxas")));
    }

    #[test]
    fn threads_select_the_cap_that_has_sass() {
        // 256 threads and fewer use the unpatched module; 512 the cubin capped at 128.
        assert_eq!(choose((9, 0), work_loop_max_registers(256), &IMAGES, None), Image::Sass(&WHOLE));
        assert_eq!(choose((9, 0), work_loop_max_registers(512), &IMAGES, None), Image::Sass(&CAPPED));
        assert_eq!(choose((9, 0), work_loop_max_registers(384), &IMAGES, None), Image::Ptx(Jit::Cap(168)));
    }

    #[test]
    fn the_embedded_ptx_has_the_work_loop_entry_once() {
        let patched = with_maxnreg(PTX, WORK_LOOP_ENTRY, 128).unwrap();
        assert_eq!(patched.matches(".maxnreg").count(), PTX.matches(".maxnreg").count() + 1);
    }

    /// Every build embeds SASS unless `FERROCCL_PTXAS=none` turned it off (a build that
    /// finds no ptxas fails): every embedded image is an sm_90a CUDA ELF with the work
    /// loop, and the uncapped module has one. The default communicator's cap is checked
    /// in `comm`'s tests.
    #[test]
    fn the_embedded_sass_is_there_unless_turned_off() {
        assert_eq!(sass::ARCH, SASS_ARCH);
        if sass::PTXAS_GIVEN {
            assert!(!sass::IMAGES.is_empty(), "FERROCCL_PTXAS was set for the build, yet no SASS is embedded");
        }
        if sass::IMAGES.is_empty() {
            assert_eq!(sass::MISSING, Some("FERROCCL_PTXAS=none"), "a build without SASS is one that turned it off");
            return;
        }
        assert_eq!(sass::MISSING, None);
        for (cap, cubin) in sass::IMAGES {
            ferroccl_ptx_builder::check_cubin(cubin).unwrap_or_else(|e| panic!("cubin for cap {cap:?}: {e}"));
        }
        assert!(has_sass(None), "no SASS for the uncapped module");
    }
}
