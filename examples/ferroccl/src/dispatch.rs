//! `ferroccl bench dispatch`: the host time of one stream-ordered collective call and of
//! the driver calls such a call can be made of, in one run.
//!
//! One rank per device of a default communicator; every measure calls the ranks in turn,
//! one operation each per round (as `ferroccl bench`'s back-to-back timing and NCCL's
//! grouped calls do), so a context switch between devices is part of every operation
//! where there are several devices. A measure is the median over [`BATCHES`] batches of
//! [`ROUNDS`] rounds of the host time per operation; every stream is synchronized after
//! each batch, outside the timed part. The round measures instead wait for every
//! stream after each round (an operation on every rank, then every stream waited for with
//! `host_shim::stream::wait`, as `ferroccl bench`'s call + synchronize timing does) and
//! give host µs per round: a collective call's against the same round of empty kernel
//! launches, the floor of any route that launches a kernel per call. The `call` measures
//! run real 8-byte all-reduces (f32 sums), whose results are checked after the last batch.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, LaunchConfig, sys};
use serde::Serialize;

use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::CollFunction;
use device_rt::work::WorkItem;
use host_shim::comm::Comm;
use host_shim::memory::buffer_info;
use host_shim::module::Module;
use host_shim::work::{DeviceAlloc, launch_call_kernel};
use host_shim::{Error, Result};

use crate::bench::{median, rounded};

/// Timed batches per measure (one more runs first, untimed).
const BATCHES: usize = 50;
/// Rounds per batch: one operation on every rank each.
const ROUNDS: usize = 200;

/// One rank's side of the benchmark.
struct Rank {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    send: CudaSlice<f32>,
    recv: CudaSlice<f32>,
    /// The word the stream memory operation writes and waits on: device memory from
    /// `cuMemAlloc`, as the loop's own `stream_done` (a plain allocation, not cudarc's
    /// stream-ordered pool).
    word: DeviceAlloc,
    module: Module,
}

/// Microseconds per operation of each measure, in the order run.
#[derive(Debug, Serialize)]
pub struct DispatchReport {
    pub devices: Vec<usize>,
    /// Call kernel of every call: CTAs × threads.
    pub call_kernel_grid: (u32, u32),
    pub measures: Vec<(&'static str, f64)>,
    /// Microseconds per round of each round measure, in the order run.
    pub rounds: Vec<(&'static str, f64)>,
}

/// What each measure is, for the table.
pub const MEANINGS: [(&str, &str); 8] = [
    ("call", "Comm::enqueue_on_stream of an 8 B all_reduce (the whole stream-ordered call)"),
    ("pointer_attributes_x2", "two cuPointerGetAttributes (the call's device check of source and destination)"),
    ("context_bind", "cuCtxSetCurrent of the rank's context (cudarc's bind_to_thread)"),
    ("is_capturing", "context bind + cuStreamIsCapturing"),
    ("stream_query", "context bind + cuStreamQuery"),
    ("launch_empty", "context bind + cuLaunchKernelEx of an empty kernel, 1 × 32, no attribute (the call kernel's launch path)"),
    ("launch_empty_call_kernel", "the same in the call kernel, programmatic serialization on"),
    ("batch_write_wait", "context bind + cuStreamBatchMemOp: write k, wait until ≥ k (met)"),
];

/// What each round measure is, for the table: every rank does it once, then every
/// stream is waited for.
pub const ROUND_MEANINGS: [(&str, &str); 3] = [
    ("call_round", "Comm::enqueue_on_stream of an 8 B all_reduce on every rank, then every stream waited for"),
    ("launch_empty_round", "an empty kernel, 1 × 32, launched on every rank, then every stream waited for"),
    ("launch_empty_call_kernel_round", "an empty kernel in the call kernel launched on every rank, then every stream waited for"),
];

/// Runs every measure with one rank on each of `devices`.
pub fn dispatch(devices: &[usize]) -> Result<DispatchReport> {
    let mut ranks = Vec::with_capacity(devices.len());
    for &ordinal in devices {
        let ctx = host_shim::device::context(ordinal)?;
        let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        // Everything that may wait for a running persistent kernel happens before the
        // communicator starts: the module load and every allocation.
        let module = Module::load(&ctx)?;
        let send = stream.clone_htod(&[1.5f32 + ranks.len() as f32, -2.25]).map_err(Error::cuda("cuMemcpyHtoD"))?;
        let recv = stream.alloc_zeros::<f32>(2).map_err(Error::cuda("cuMemAlloc"))?;
        let word = DeviceAlloc::zeroed(&ctx, 4)?;
        ranks.push(Rank { ctx, stream, send, recv, word, module });
    }
    for r in &ranks {
        r.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
        // SAFETY: every use of the buffers is on the rank's stream; the items name them by
        // address, so no event tracking is needed (and none may enter a stream the loop
        // waits on).
        unsafe { r.ctx.disable_event_tracking() };
    }
    let comms = Comm::from_devices(ranks.iter().map(|r| r.stream.clone()).collect())?;
    let result = measure_all(&ranks, &comms);
    let shutdown = comms.into_iter().try_for_each(|mut c| c.shutdown(std::time::Duration::from_secs(20)));
    let report = result?;
    shutdown?;
    Ok(report)
}

fn measure_all(ranks: &[Rank], comms: &[Comm]) -> Result<DispatchReport> {
    let nranks = u32::try_from(ranks.len()).map_err(|_| Error::InvalidArgument("too many devices".into()))?;
    let items: Vec<WorkItem> = ranks
        .iter()
        .map(|r| {
            let (src, _) = r.send.device_ptr(&r.stream);
            let (dst, _) = r.recv.device_ptr(&r.stream);
            WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src, dst, 2, 0)
        })
        .collect();
    let call_kernel_grid = (comms[0].channels(), host_shim::comm::Tuning::default().loop_cfg.threads);
    let empties: Vec<_> = ranks.iter().map(|r| r.module.kernel("ferroccl_empty")).collect::<Result<_>>()?;
    let mut measures = Vec::new();
    let mut counter = 0u32;
    for (name, _) in MEANINGS {
        let us = time_per_op(ranks, false, &mut |i| {
            let r = &ranks[i];
            counter = counter.wrapping_add(1);
            match name {
                // SAFETY: the item's buffers are the rank's `send` and `recv` (2 elements each,
                // device memory of its device), used on its stream only and kept until the
                // communicators are shut down.
                "call" => unsafe { comms[i].enqueue_on_stream(items[i]) },
                "pointer_attributes_x2" => buffer_info(items[i].src, r.stream.context().cu_ctx(), &[]).and_then(|_| buffer_info(items[i].dst, r.stream.context().cu_ctx(), &[])).map(drop),
                "context_bind" => bind(r),
                // SAFETY: a live stream of the bound context.
                "is_capturing" => bind(r).and_then(|()| unsafe { cudarc::driver::result::stream::is_capturing(r.stream.cu_stream()) }.map(drop).map_err(Error::cuda("cuStreamIsCapturing"))),
                "stream_query" => bind(r).map(|()| {
                    // SAFETY: as above; busy or idle, both are answers.
                    let _ = unsafe { sys::cuStreamQuery(r.stream.cu_stream()) };
                }),
                "launch_empty" => launch_empty(r, &empties[i], (1, 32), false),
                "launch_empty_call_kernel" => launch_empty(r, &empties[i], call_kernel_grid, true),
                _ => bind(r).and_then(|()| write_wait(r, counter)),
            }
        })?;
        measures.push((name, us));
    }
    let mut rounds = Vec::new();
    for (name, _) in ROUND_MEANINGS {
        let us = time_per_op(ranks, true, &mut |i| match name {
            // SAFETY: as for "call" above.
            "call_round" => unsafe { comms[i].enqueue_on_stream(items[i]) },
            "launch_empty_round" => launch_empty(&ranks[i], &empties[i], (1, 32), false),
            _ => launch_empty(&ranks[i], &empties[i], call_kernel_grid, true),
        })?;
        rounds.push((name, us));
    }
    check_results(ranks, nranks)?;
    Ok(DispatchReport { devices: ranks.iter().map(|r| r.ctx.ordinal()).collect(), call_kernel_grid, measures, rounds })
}

fn bind(r: &Rank) -> Result<()> {
    r.ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))
}

/// The call kernel's own launch path (context bind, `cuLaunchKernelEx`) with the empty
/// kernel.
fn launch_empty(r: &Rank, kernel: &cudarc::driver::CudaFunction, (grid, block): (u32, u32), serialize: bool) -> Result<()> {
    let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: `ferroccl_empty` takes no parameters and waits for nothing.
    unsafe { launch_call_kernel(&r.stream, kernel, cfg, &mut [], serialize) }
}

fn write_wait(r: &Rank, value: u32) -> Result<()> {
    let address = r.word.ptr();
    // SAFETY: all-zero memory-operation parameters are valid values of the C union.
    let mut ops: [sys::CUstreamBatchMemOpParams; 2] = unsafe { std::mem::zeroed() };
    ops[0].writeValue.operation = sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = address;
    ops[0].writeValue.__bindgen_anon_1.value = value;
    ops[1].waitValue.operation = sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = address;
    ops[1].waitValue.__bindgen_anon_1.value = value;
    ops[1].waitValue.flags = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32;
    // SAFETY: two initialized operations on the rank's own word, on a live stream.
    unsafe { sys::cuStreamBatchMemOp_v2(r.stream.cu_stream(), 2, ops.as_mut_ptr(), 0) }.result().map_err(Error::cuda("cuStreamBatchMemOp"))
}

/// The median over the batches of the host µs per operation of `op(rank)`, or with
/// `waited`, per round: every stream waited for after every round.
fn time_per_op(ranks: &[Rank], waited: bool, op: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
    let wait_all = || ranks.iter().try_for_each(|r| host_shim::stream::wait(&r.stream, std::time::Duration::from_secs(20), "a round of the dispatch benchmark"));
    let mut per_op = Vec::with_capacity(BATCHES);
    for batch in 0..=BATCHES {
        let start = Instant::now();
        for _ in 0..ROUNDS {
            for i in 0..ranks.len() {
                op(i)?;
            }
            if waited {
                wait_all()?;
            }
        }
        let ops = if waited { ROUNDS } else { ROUNDS * ranks.len() };
        let us = start.elapsed().as_secs_f64() * 1e6 / ops as f64;
        wait_all()?;
        if batch > 0 {
            per_op.push(us);
        }
    }
    Ok(median(per_op))
}

/// Every rank's `recv` holds the sum of every rank's `send`.
fn check_results(ranks: &[Rank], nranks: u32) -> Result<()> {
    let want = [(0..nranks).map(|r| 1.5 + r as f32).sum::<f32>(), -2.25 * nranks as f32];
    for r in ranks {
        let got = r.stream.clone_dtoh(&r.recv).map_err(Error::cuda("cuMemcpyDtoH"))?;
        if got != want {
            return Err(Error::InvalidState("dispatch benchmark: an all_reduce gave a wrong result"));
        }
    }
    Ok(())
}

/// The report as a table, one measure a line.
pub fn table(r: &DispatchReport) -> String {
    let mut out = format!("# host µs per operation, ranks on devices {:?} called in turn; call kernel {} × {}\n", r.devices, r.call_kernel_grid.0, r.call_kernel_grid.1);
    for (name, us) in &r.measures {
        let meaning = MEANINGS.iter().find(|(n, _)| n == name).map_or("", |(_, m)| m);
        out += &format!("{name:>28} {us:>8.3}  {meaning}\n");
    }
    out += "# host µs per round\n";
    for (name, us) in &r.rounds {
        let meaning = ROUND_MEANINGS.iter().find(|(n, _)| n == name).map_or("", |(_, m)| m);
        out += &format!("{name:>28} {us:>8.3}  {meaning}\n");
    }
    out
}

/// The report as JSON (µs rounded to ns).
pub fn json(r: &DispatchReport, gpu: &str, date_utc: &str, command: &str) -> String {
    let map = |m: &[(&str, f64)]| m.iter().map(|(n, us)| ((*n).to_owned(), rounded(*us, 3).into())).collect::<serde_json::Map<String, serde_json::Value>>();
    let body = serde_json::json!({ "command": command, "device": gpu, "date": date_utc, "devices": r.devices, "call_kernel_grid": r.call_kernel_grid, "us_per_op": map(&r.measures), "us_per_round": map(&r.rounds) });
    serde_json::to_string_pretty(&body).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn the_json_names_every_measure_and_the_table_explains_each() {
        let timed = |m: &[(&'static str, &str)]| m.iter().enumerate().map(|(i, (n, _))| (*n, 1.0 + i as f64 / 3.0)).collect();
        let r = DispatchReport { devices: vec![0, 1], call_kernel_grid: (64, 256), measures: timed(&MEANINGS), rounds: timed(&ROUND_MEANINGS) };
        let v: Value = serde_json::from_str(&json(&r, "[0] H200, [1] H200", "2026-11-28T00:00:00Z", "ferroccl bench dispatch --devices 0,1")).unwrap();
        let measures = v["us_per_op"].as_object().unwrap();
        assert_eq!(measures.len(), MEANINGS.len());
        assert_eq!(measures["pointer_attributes_x2"], 1.333, "rounded to ns");
        assert_eq!(v["us_per_round"].as_object().unwrap().len(), ROUND_MEANINGS.len());
        assert_eq!((v["devices"][1].as_u64(), v["call_kernel_grid"][0].as_u64()), (Some(1), Some(64)));
        let table = table(&r);
        for (name, meaning) in MEANINGS.iter().chain(&ROUND_MEANINGS) {
            assert!(table.lines().any(|l| l.trim_start().starts_with(name) && l.ends_with(meaning)), "{name} in {table}");
        }
    }
}
