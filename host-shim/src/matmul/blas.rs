//! A rank's GEMMs through cuBLASLt: `C = A × B (+ acc)` on row-major matrices, products
//! and the accumulator summed in f32, one rounding to f16 or bf16.
//!
//! cuBLASLt is column-major; a row-major `r × c` matrix is the column-major `c × r` one,
//! so `C = A × B` is computed as `Cᵀ = Bᵀ × Aᵀ`: cuBLASLt's first operand is `B`
//! (`n × k`, leading dimension `n`), its second `A` (`k × rows`, leading dimension `k`),
//! its output `C` (`n × rows`, leading dimension `n`), no transposes. One descriptor,
//! layout set and algorithm (the heuristic's first) per distinct row count and
//! accumulator, made once.
//!
//! Where a ring has neighbours, its watch lane's one-thread wait kernel stays resident
//! while the GEMMs run: cuBLASLt, planning for every SM, then loses far more than one SM's
//! share (its kernels run in clusters of two CTAs; a 4096-row GEMM took 1.26 times as
//! long beside one resident wait kernel, `bench/NOTES.md`). Such GEMMs are planned for
//! [`SMS_LEFT_TO_WAITS`] fewer SMs (`CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET`), which cost
//! the GEMMs alone nothing measurable.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublaslt::{result as lt, sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use device_rt::dtype::DataType;
use device_rt::matmul::Shape;

use crate::{Error, Result};

/// cuBLASLt's workspace (what cudarc gives Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

/// SMs a ring's GEMMs leave to the waits beside them: one cluster of two, for one wait
/// kernel (one planned for 131 or 129 SMs ran beside one as fast as alone; three wait
/// kernels at once still cost 1.5 times the GEMM's time at 129).
pub const SMS_LEFT_TO_WAITS: u32 = 2;

/// One GEMM's descriptor, layouts and algorithm.
pub struct Plan {
    rows: u64,
    accumulates: bool,
    desc: sys::cublasLtMatmulDesc_t,
    /// `B`'s, `A`'s, `C`'s (also the accumulator's) layouts.
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
}

/// A rank's cuBLASLt handle, workspace and plans.
pub struct Blas {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    k: u64,
    n: u64,
    dtype: sys::cudaDataType,
    /// The SMs the GEMMs are planned for (`None`: every SM).
    sm_target: Option<i32>,
    plans: Vec<Plan>,
}

// SAFETY: the handle and descriptors are used by one thread at a time (the owner's
// `&mut self`); cuBLASLt allows a handle on any thread.
unsafe impl Send for Blas {}

fn blas_error(call: &'static str) -> impl FnOnce(lt::CublasError) -> Error {
    move |e| Error::InvalidArgument(format!("{call}: {e:?}"))
}

impl Blas {
    /// A handle and workspace on `stream`'s device for `shape`'s GEMMs, planned for
    /// [`SMS_LEFT_TO_WAITS`] fewer SMs than the device has where the ring has neighbours.
    pub fn new(stream: &Arc<CudaStream>, shape: &Shape) -> Result<Self> {
        stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let sm_target = match shape.nranks {
            1 => None,
            _ => Some(crate::device::sm_count(stream.context())?.saturating_sub(SMS_LEFT_TO_WAITS).max(1) as i32),
        };
        let dtype = match shape.dtype {
            DataType::F16 => sys::cudaDataType::CUDA_R_16F,
            DataType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
            other => return Err(Error::InvalidArgument(format!("collective matmul of {}", other.short_name()))),
        };
        let handle = lt::create_handle().map_err(blas_error("cublasLtCreate"))?;
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES).map_err(Error::cuda("cuMemAllocAsync"));
        match workspace {
            Ok(workspace) => Ok(Self { handle, workspace, k: shape.k, n: shape.n, dtype, sm_target, plans: Vec::new() }),
            Err(e) => {
                // SAFETY: the handle was just made and is used nowhere else.
                let _ = unsafe { lt::destroy_handle(handle) };
                Err(e)
            }
        }
    }

    /// Runs every plan once on scratch matrices of zeros and waits for them: what cuBLASLt
    /// does at a kernel's first use (loading it, setting its attributes) can wait for the
    /// device's running kernels, a communicator's persistent loop among them (which never
    /// ends), so it is done at construction, where loading belongs (`RingMatmul::new`).
    pub fn warm_up(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        let Some(rows) = self.plans.iter().map(|p| p.rows).max() else { return Ok(()) };
        let bytes = |r: u64, c: u64| (r * c * 2) as usize;
        let a = stream.alloc_zeros::<u8>(bytes(rows, self.k)).map_err(Error::cuda("cuMemAllocAsync"))?;
        let b = stream.alloc_zeros::<u8>(bytes(self.k, self.n)).map_err(Error::cuda("cuMemAllocAsync"))?;
        let c = stream.alloc_zeros::<u8>(bytes(rows, self.n)).map_err(Error::cuda("cuMemAllocAsync"))?;
        let ((a_at, _ra), (b_at, _rb), (c_at, _rc)) = (a.device_ptr(stream), b.device_ptr(stream), c.device_ptr(stream));
        let plans: Vec<(u64, bool)> = self.plans.iter().map(|p| (p.rows, p.accumulates)).collect();
        for (rows, accumulates) in plans {
            // SAFETY: the scratch matrices hold `rows × k`, `k × n` and `rows × n` 16-bit
            // elements (`rows` at most the largest plan's), live until the stream is synchronized below.
            unsafe { self.gemm(stream, rows, a_at, b_at, accumulates.then_some(c_at), c_at) }?;
        }
        stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))
    }

    /// The plan for `rows` rows with or without an accumulator, made on first use
    /// (`RingMatmul::new` asks for every plan of its schedule, so that a shape cuBLASLt
    /// refuses is refused before any call).
    pub fn plan(&mut self, rows: u64, accumulates: bool) -> Result<&Plan> {
        if let Some(at) = self.plans.iter().position(|p| p.rows == rows && p.accumulates == accumulates) {
            return Ok(&self.plans[at]);
        }
        let (k, n) = (self.k, self.n);
        let desc = lt::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, sys::cudaDataType::CUDA_R_32F).map_err(blas_error("cublasLtMatmulDescCreate"))?;
        let mut plan = Plan { rows, accumulates, desc, layouts: [std::ptr::null_mut(); 3], algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] } };
        if let Some(target) = self.sm_target {
            // SAFETY: `desc` is live; the attribute is an `i32` of the size given.
            let set = unsafe { lt::set_matmul_desc_attribute(desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, (&raw const target).cast(), size_of::<i32>()) };
            if let Err(e) = set {
                drop_plan(&plan);
                return Err(blas_error("cublasLtMatmulDescSetAttribute")(e));
            }
        }
        let dims = [(n, k, n), (k, rows, k), (n, rows, n)];
        for (layout, (r, c, ld)) in plan.layouts.iter_mut().zip(dims) {
            *layout = match lt::create_matrix_layout(self.dtype, r, c, ld as i64) {
                Ok(l) => l,
                Err(e) => {
                    drop_plan(&plan);
                    return Err(blas_error("cublasLtMatrixLayoutCreate")(e));
                }
            };
        }
        match self.heuristic(&plan) {
            Ok(algo) => plan.algo = algo,
            Err(e) => {
                drop_plan(&plan);
                return Err(e);
            }
        }
        self.plans.push(plan);
        Ok(&self.plans[self.plans.len() - 1])
    }

    fn heuristic(&self, plan: &Plan) -> Result<sys::cublasLtMatmulAlgo_t> {
        let pref = lt::create_matmul_pref().map_err(blas_error("cublasLtMatmulPreferenceCreate"))?;
        let bytes = WORKSPACE_BYTES as u64;
        // SAFETY: `pref` is live; the attribute is a `u64` of the size given.
        let found = unsafe {
            lt::set_matmul_pref_attribute(pref, sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, (&raw const bytes).cast(), size_of::<u64>())
                .and_then(|()| lt::get_matmul_algo_heuristic(self.handle, plan.desc, plan.layouts[0], plan.layouts[1], plan.layouts[2], plan.layouts[2], pref))
        };
        // SAFETY: `pref` is live and used nowhere else.
        let _ = unsafe { lt::destroy_matmul_pref(pref) };
        found.map(|h| h.algo).map_err(blas_error("cublasLtMatmulAlgoGetHeuristic"))
    }

    /// Queues `c = a × B (+ acc)` on `stream` for `rows` rows.
    ///
    /// # Safety
    /// `a` holds `rows × k` elements, `b` `k × n`, `c` (and `acc`, when given) `rows × n`,
    /// of the shape's type, live until `stream` has passed the GEMM.
    pub unsafe fn gemm(&mut self, stream: &CudaStream, rows: u64, a: u64, b: u64, acc: Option<u64>, c: u64) -> Result<()> {
        let (desc, [lb, la, lc], algo) = {
            let plan = self.plan(rows, acc.is_some())?;
            (plan.desc, plan.layouts, plan.algo)
        };
        let (handle, (ws, _record)) = (self.handle, self.workspace.device_ptr(stream));
        let (alpha, beta) = (1f32, if acc.is_some() { 1f32 } else { 0f32 });
        // SAFETY: the operands as this function's contract says, laid out as `plan`
        // describes; the workspace is this handle's.
        unsafe {
            lt::matmul(
                handle,
                desc,
                (&raw const alpha).cast(),
                (&raw const beta).cast(),
                b as *const c_void,
                lb,
                a as *const c_void,
                la,
                acc.unwrap_or(c) as *const c_void,
                lc,
                c as *mut c_void,
                lc,
                &raw const algo,
                ws as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(blas_error("cublasLtMatmul"))
    }
}

/// Frees a plan's descriptor and layouts (errors ignored: nothing to do about them).
fn drop_plan(plan: &Plan) {
    // SAFETY: the plan's objects are live (or null, which is skipped) and used nowhere else.
    unsafe {
        for &layout in plan.layouts.iter().filter(|l| !l.is_null()) {
            let _ = lt::destroy_matrix_layout(layout);
        }
        let _ = lt::destroy_matmul_desc(plan.desc);
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        for plan in &self.plans {
            drop_plan(plan);
        }
        // SAFETY: the handle is live and used nowhere else.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}
