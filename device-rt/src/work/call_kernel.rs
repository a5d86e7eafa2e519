//! Call channels: a communicator's channels beyond its loop's own. The loop kernel keeps
//! only its resident channels on the GPU for its lifetime (one CTA by default), so an
//! idle communicator holds almost none of the SMs that other work could use; the rest of
//! the communicator's channels come with the stream-ordered calls that need them.
//!
//! A stream-ordered call launches the call kernel on the user's stream: CTA 0 submits the
//! item to the loop's mailbox and waits for it (`submit_to_mailbox`); CTA `g ≥ 1` is call
//! channel `resident + g - 1`. From the item alone (its kernel arguments) every CTA of the
//! grid and every resident channel computes the same participation (`participation`): the
//! channels the item's plan spreads over, and which of them take part. A call channel that
//! takes no part leaves at once, so a small call costs a few CTAs that start and end; a
//! call channel that takes part runs its channel's share exactly as a resident channel
//! would, then arrives at the mailbox item's completion like one (the last of the item's
//! channels completes it).
//!
//! A small stream-ordered collective does not need the loop at all: a one-shot/two-shot
//! algorithm (of any function), or a one-rank collective (a local copy),
//! planned on no more channels than the call channels runs on the call kernel alone
//! (`call_kernel_only_plan`), its part `i` on call channel `resident + i` (CTA `i + 1`),
//! and CTA 0 submits nothing. The grid's end is the item's completion: the work that
//! follows on the stream waits for it, and sees its writes, as after any kernel. This saves
//! the mailbox's round trip (the submission, the loop's poll, the completion's system-scope
//! fence and arrival, the submitter's acquire) on exactly the calls where it costs most.
//! The loop never sees such an item; an error in it is recorded and closes the mailbox, as
//! a call channel's does. All ranks choose alike (the choice is arithmetic over the item
//! and the communicator), so the same call channels, with the same staging epochs, meet.
//! Both paths of one communicator must be the same on every rank for one call (the stream
//! on every rank, or the direct path on every rank), as the channels an item spreads over
//! differ between them.
//!
//! Why call channels never race: a call channel is used by call kernels only, and the
//! user's stream runs them one after another (the loop serves one stream), each only after
//! the previous item completed; its connections' steps and its staging epoch live in device
//! memory between items, as every channel's do. The direct path (ring items) spreads
//! over the resident channels only.
//!
//! Residency: a call channel waits for its peers' same channel, which comes with their own
//! call kernels. The host launches a call kernel only where every rank of the device can
//! hold its resident channels and a whole call kernel at once (host-shim's residency
//! check), so a call channel never waits for an SM that a waiting call channel holds; a
//! peer that never makes the call ends in the spin budget, as in any wait. Call kernels
//! launched to overlap the one before them (where the device holds two call kernels per
//! rank: `after_previous_grid`) keep that true: a stream has at most two call kernels on
//! the GPU, the second waiting for the first's end without holding anything a grid of
//! another rank needs beyond its room.

use super::channel::{Channel, LoopArgs};
use super::complete::{channel_stats, close_mailbox, complete_mailbox, count_call_kernel_part, record_error, stats_entry};
use super::dispatch::{Stop, execute, planned_collective};
use super::item::WorkItem;
use super::mailbox::{count_submit, submit_to_mailbox};
use super::queue::{LoopShared, LoopState, MAILBOX_CLOSED, QueueHeader};
use super::participation::mailbox_participation;
use super::without_loop::{call_kernel_only_plan, ll_call};
use crate::algo::ll::{LlCall, LlComm, LlPlan, LlRun, ll_collective};
use crate::arch;
use crate::conn::{CommDevice, StagingConns};

/// What the call kernel is launched with.
#[derive(Clone, Copy, Debug)]
pub struct CallArgs {
    /// The loop's device-memory state (its mailbox).
    pub state: *mut LoopState,
    /// The loop's host-mapped queue header (its abort flag and error status).
    pub header: *mut QueueHeader,
    /// The rank's communicator, or null for a loop without one (no call channels).
    pub comm: *const CommDevice,
    /// The item.
    pub item: WorkItem,
    /// How long any wait may spin.
    pub spin_budget_ns: u64,
    /// The loop's resident channels: CTA `g ≥ 1` of the grid is channel `resident + g - 1`.
    pub resident: u32,
    /// Whether the host counted this call's submission (`submits_seen`'s other side, the
    /// loop's sleep handshake): false for a call captured in a CUDA graph, whose replays
    /// the host never sees. An uncounted call that runs without the loop
    /// ([`runs_without_loop`](super::runs_without_loop)) counts nothing, so the loop may still sleep; one that needs
    /// the loop comes only to a loop the host pinned awake, which never sleeps, and its
    /// submission counts as any.
    pub counted: bool,
}

/// What a call channel tests before it runs any part of an item: the loop's mailbox state
/// and its error claim, as the call kernel found them when it started.
#[derive(Clone, Copy)]
struct LoopGate {
    mailbox: u64,
    error_claimed: u64,
}

impl LoopGate {
    /// Loads both words, each in flight until [`LoopGate::is_open`] uses it.
    ///
    /// Ordering: relaxed GPU-scope loads. A call channel only leaves at once on what they
    /// say (a loop that has closed its mailbox or recorded an error takes no more work); it
    /// reads nothing that was published with them.
    ///
    /// # Safety
    /// `state` is a running loop's live `LoopState`.
    unsafe fn load(state: *const LoopState) -> Self {
        // SAFETY: `state` is live (this function's contract); `mailbox.state` and
        // `error_claimed` are aligned words of it, changed only through `arch` atomics.
        unsafe { Self { mailbox: arch::ld_relaxed_gpu_global(&raw const (*state).mailbox.state), error_claimed: arch::ld_relaxed_gpu_global(&raw const (*state).error_claimed) } }
    }

    /// True where the mailbox was open and no error recorded.
    fn is_open(self) -> bool {
        self.mailbox & MAILBOX_CLOSED == 0 && self.error_claimed == 0
    }
}

/// A stream-ordered item that runs as an LL collective: what [`ll_item`] read and chose.
struct LlItem {
    comm: LlComm,
    call: LlCall,
    plan: LlPlan,
}

/// The LL collective (`algo::ll`) that `p.item` is, and its plan from call channel
/// `resident` on, when it is one: an all-reduce, all-gather or reduce-scatter of a
/// communicator with call channels that leaves the algorithm to the device, of a known
/// type and operator, that [`ll_plan`] takes (the device prefers it to one-shot and
/// two-shot wherever it runs: measured on 2 and 4 ranks, provisional on more). `None`:
/// the item goes the general way. Arithmetic over the item and the communicator: every
/// CTA of the grid, on every rank, gets the same answer, and the same call channels'
/// epochs advance on every rank.
///
/// # Safety
/// `p.comm` is null or the rank's valid `CommDevice`, with its staging memory.
unsafe fn ll_item(p: &CallArgs) -> Option<LlItem> {
    // SAFETY: this function's contract.
    let (comm, call, plan) = unsafe { ll_call(p.comm, p.resident, arch::block_dim(), &p.item) }?;
    Some(LlItem { comm, call, plan })
}

/// Runs CTA `g`'s run of the LL collective `ll` on this CTA, call channel
/// `p.resident + g`, unless `gate` says the loop had closed its mailbox or recorded an
/// error (then, as a call channel, it leaves); thread 0 of each CTA counts its run on its
/// channel as a part of a one-shot run on the call kernel alone (`call_kernel_parts` and
/// the collective's counters, as a one-shot over the same channels counts), and
/// thread 0 of any CTA whose run fails records the error and closes the mailbox, as a
/// call channel does.
///
/// # Safety
/// As [`serve_call`]; `ll` is what [`ll_item`] gave for `p`, `g < ll.plan.ctas`;
/// `shared` is this CTA's `LoopShared`; every thread of the CTA calls it.
unsafe fn serve_ll(p: &CallArgs, ll: &LlItem, g: u32, shared: *mut LoopShared, entered: u64, gate: LoopGate) {
    let LlItem { comm, call, plan } = ll;
    let args = LoopArgs { header: p.header, ring: core::ptr::null(), capacity: 0, state: p.state, spin_budget_ns: p.spin_budget_ns, comm: p.comm };
    let channel = p.resident + g;
    let a = Channel { args, index: channel, count: channel + 1 };
    // `comm.staging` is the rank's `[StagingConns; nchannels]` (`ll_plan`), which covers
    // `channel < nchannels`.
    let conns = (comm.staging as *mut StagingConns).wrapping_add(channel as usize);
    let stats = stats_entry(comm.stats, channel);
    // SAFETY: `conns` and the lines are CTA `g`'s of `ll_item`'s plan; `wait_result` is a
    // word of this CTA's shared memory that nothing else uses during the call; the header's
    // abort flag is readable while the loop lives; `stats` is the channel's (or null).
    let outcome = unsafe { ll_collective(comm, conns, call, plan.lines(g, call), &raw mut (*shared).wait_result, &raw const (*p.header).abort, p.spin_budget_ns, stats, || gate.is_open()) };
    if arch::thread_idx() == 0 {
        match outcome {
            // SAFETY: `stats` is this call channel's; thread 0 alone counts its part.
            Ok(LlRun::Done) => unsafe { count_call_kernel_part(stats, entered) },
            Ok(LlRun::Left) => {}
            // SAFETY: `a` holds the loop's live state and header; thread 0 alone records.
            Err((error, detail)) => unsafe {
                record_error(&a, error, detail, 0);
                close_mailbox(p.state);
            },
        }
    }
}

/// Waits until the kernel before this grid on its stream has ended and its writes are
/// visible (`grid_dependency_wait`; at once for a grid launched without programmatic
/// stream serialization), then lets the next kernel of the stream start (each thread of a
/// CTA that takes part calls this; the others leave). Only then may the next call kernel
/// start, so a stream has at most two call kernels on the GPU at once: the one that runs
/// and the next, planning its item, then waiting here (the host allows the overlap only
/// where the device holds two call kernels per rank beside the loops: see
/// `host_shim::comm`).
///
/// Ordering: as a kernel boundary of the stream, for this thread.
pub fn after_previous_grid() {
    arch::grid_dependency_wait();
    arch::launch_dependents();
}

/// The call kernel of a loop without call channels (`ferroccl_call_kernel_alone`: one CTA
/// of 32 threads): thread 0 waits for the kernel before it (`after_previous_grid`), then
/// submits `item` and waits for it (`submit_to_mailbox`); the other threads leave.
///
/// # Safety
/// As `submit_to_mailbox`, for `state` and `header` of one running loop (one submission at
/// a time: the host's one-stream rule).
pub unsafe fn serve_call_alone(state: *mut LoopState, header: *mut QueueHeader, item: WorkItem, spin_budget_ns: u64) {
    if arch::thread_idx() == 0 {
        after_previous_grid();
        // SAFETY: this function's contract is `submit_to_mailbox`'s, for the one submitter.
        let _ = unsafe { submit_to_mailbox(state, header, item, spin_budget_ns) };
    }
}

/// The call kernel's body (see the module doc): an item that runs on the call kernel alone
/// runs its part `g - 1` on CTA `g ≥ 1` (call channel `resident + g - 1`) where it has
/// one; otherwise CTA 0's thread 0 submits the item and waits for it, and CTA `g ≥ 1`
/// serves call channel `resident + g - 1` if the item takes part there, else leaves.
///
/// Ordering: every thread that touches memory other than the item and the communicator's
/// fixed fields first runs [`after_previous_grid`]: the grid may start while the kernel
/// before it on its stream still runs (the host may launch call kernels with programmatic
/// stream serialization), and the wait puts that kernel's end and writes, the previous
/// item's included, before what follows. The submission as `submit_to_mailbox`. A call
/// channel reads the mailbox state and the error claim (`LoopGate`, relaxed, after the
/// wait) only to leave at once when the loop has closed it or recorded an error; it runs
/// its share with the primitives' own ordering, then arrives as a resident channel
/// does (`complete_mailbox`: `fence.acq_rel.sys`, acq_rel arrival count, the last
/// arrival's acq_rel completion), so the submitter, which acquires the completion, sees the
/// call channel's writes. A part of an item on the call kernel alone arrives nowhere: the
/// grid's end orders its writes before the stream's next work. A call channel that fails
/// records the loop's error (a claim, then a release store) and closes the mailbox, so the
/// submitter and the loop stop too.
///
/// # Safety
/// `p.state`, `p.header` and `p.comm` are one running loop's (its communicator's
/// connections cover `p.comm.nchannels` channels, and `p.resident` is the loop's channel
/// count); the CTA has `LOOP_SMEM_BYTES` of dynamic shared memory and a multiple of 32
/// threads (CTA 0: at least 1); one call kernel of the loop runs at a time (one stream);
/// `p.item` passed the host's validation.
pub unsafe fn serve_call(p: CallArgs) {
    let tid = arch::thread_idx();
    let shared = arch::dyn_smem().cast::<LoopShared>();
    // Until `after_previous_grid`, a thread reads only the item (kernel parameters) and
    // the communicator's fields, which the host wrote before the loop started and which
    // nothing changes: the plan overlaps the work before this grid on its stream.
    // SAFETY: `p` holds the running loop's memory and the rank's communicator (this
    // function's contract).
    if let Some(ll) = unsafe { ll_item(&p) } {
        if arch::block_idx() == 0 && tid == 0 && p.counted {
            // SAFETY: `p.state` is the loop's live state (this function's contract).
            unsafe { count_submit(p.state) };
        }
        let g = arch::block_idx().wrapping_sub(1);
        if g < ll.plan.ctas {
            after_previous_grid();
            // The part's start, for the statistics of a part run on the call kernel alone.
            let entered = arch::globaltimer_ns();
            // SAFETY: `p.state` is the running loop's state (this function's contract).
            let gate = unsafe { LoopGate::load(p.state) };
            // SAFETY: as above; CTA `g + 1` is call channel `resident + g`, below the
            // communicator's channels (`ll_plan`).
            unsafe { serve_ll(&p, &ll, g, shared, entered, gate) };
        }
        return;
    }
    let kind = p.item.validate();
    let call_kernel_only = match kind {
        // SAFETY: `p.comm` is null or the rank's valid `CommDevice` (this function's contract).
        Ok(kind) => unsafe { call_kernel_only_plan(p.comm, p.resident, &p.item, kind) },
        Err(_) => None,
    };
    if arch::block_idx() == 0 {
        if tid == 0 && call_kernel_only.is_none() {
            after_previous_grid();
            // SAFETY: this function's contract is `submit_to_mailbox`'s, for the one
            // submitter.
            let _ = unsafe { submit_to_mailbox(p.state, p.header, p.item, p.spin_budget_ns) };
        } else if tid == 0 && p.counted {
            // SAFETY: `p.state` is the loop's live state (this function's contract).
            unsafe { count_submit(p.state) };
        }
        return;
    }
    let Ok(kind) = kind else { return };
    let g = arch::block_idx() - 1;
    let channel = p.resident + g;
    // The channels the item spreads over, the part this CTA runs, and how many channels
    // arrive at the mailbox's completion (unused without the mailbox).
    let (count, part, arrivals) = match call_kernel_only {
        Some(plan) if g < plan.channels => (p.resident + plan.channels, g, plan.channels),
        Some(_) => return,
        None => {
            // SAFETY: as for `call_kernel_only_plan`.
            let participation = unsafe { mailbox_participation(p.comm, p.resident, &p.item, kind) };
            if channel >= participation.arrivals {
                return;
            }
            (participation.channels, channel, participation.arrivals)
        }
    };
    after_previous_grid();
    // The part's start, for the statistics of a part run on the call kernel alone.
    let entered = arch::globaltimer_ns();
    if tid == 0 {
        // SAFETY: `p.state` is the running loop's state (this function's contract); a call
        // channel CTA has `LOOP_SMEM_BYTES` of dynamic shared memory holding its
        // `LoopShared` (this function's contract); thread 0 alone writes `wait_result`,
        // before the CTA barrier that precedes every read of it (one reader: every thread
        // leaves or none).
        unsafe { (&raw mut (*shared).wait_result).write_volatile(u64::from(LoopGate::load(p.state).is_open())) };
    }
    arch::barrier_sync_all();
    // SAFETY: the barrier above orders thread 0's write before every thread's read.
    if unsafe { (&raw const (*shared).wait_result).read_volatile() } == 0 {
        return;
    }
    let args = LoopArgs { header: p.header, ring: core::ptr::null(), capacity: 0, state: p.state, spin_budget_ns: p.spin_budget_ns, comm: p.comm };
    let a = Channel { args, index: channel, count };
    let outcome = if let Some(plan) = call_kernel_only {
        // SAFETY: `a` holds the running loop's memory (this function's contract) and a call
        // channel below the communicator's count, which its connections cover; the item is a
        // collective valid against the communicator, `plan` is its plan (a
        // one-shot/two-shot algorithm, or one rank's local copy) of which `part` is a part
        // (`call_kernel_only_plan`); `shared` is this CTA's `LoopShared`, and every thread
        // of the CTA runs it with the same arguments.
        unsafe { planned_collective(&a, &p.item, shared, part, plan) }
    } else {
        // SAFETY: as above, with the item's validated kind and the mailbox participation.
        unsafe { execute::<false>(&a, kind, &p.item, shared) }
    };
    arch::barrier_sync_all();
    if tid == 0 {
        match outcome {
            // SAFETY: `a` is this call channel; thread 0 alone arrives, once, with the
            // item's participation.
            Ok(()) if call_kernel_only.is_none() => unsafe { complete_mailbox(&a, true, arrivals) },
            // SAFETY: `a` is this call channel; thread 0 alone counts the part, once.
            Ok(()) => unsafe { count_call_kernel_part(channel_stats(&a), entered) },
            Err(Stop::Error(error, detail)) => {
                // SAFETY: `a` holds the loop's live state and header; thread 0 alone records.
                unsafe {
                    record_error(&a, error, detail, 0);
                    close_mailbox(p.state);
                }
            }
            Err(Stop::PeerFailed) => {}
        }
    }
}
