//! NCCL's `Primitives` (Simple protocol): a group of threads moves slices of data through
//! step FIFOs to and from peers, reducing on the way.
//!
//! Roles follow [NCCL](https://github.com/NVIDIA/nccl)'s `Primitives` exactly. Threads
//! are split into groups of [`THREAD_PER_SYNC`]; in group 0, thread `i < nrecv` waits for
//! receive peer `i` (WaitRecv) and thread `nrecv` publishes the user input pointer
//! (Input); in group 1, thread `i < nsend` waits for send peer `i` (WaitSend) and thread
//! `nsend` publishes the output (Output); in the next-to-last group thread `i < nrecv`
//! returns credits to receive peer `i` (PostRecv), in the last group thread `i < nsend`
//! posts data to send peer `i` (PostSend). When the group has enough threads its last
//! warp does not copy data (`nworkers = nthreads - 32`): it only posts, so the
//! system-scope fence before a post overlaps the copy of the next slice. Workers and the
//! posting warp meet at a barrier once per slice.
//!
//! Every wait is bounded by the host's abort flag and the loop's spin budget; when one
//! ends early the group records why in shared memory, stops moving data, and stops
//! posting (a peer never sees a step whose data was not written): the item then ends
//! with that error.

mod movers;
mod ops;

pub use movers::{DataOp, Movers, MulticastMovers, UNROLL, reduce, transform};

use core::marker::PhantomData;

use crate::arch::{self, AtomicWord, Site, WARP_SIZE};
use crate::conn::{CONN_NVLS_MIN_POLL, ChannelStats, ConnInfo, NCCL_STEPS, SIZE_LAST};
use crate::multicast::Multicast;
use crate::spin::{Interrupted, SpinGuard};
use crate::abi::{LoopError, MAX_ARITY, PrimsShared, THREAD_PER_SYNC, WaitSite};


/// A protocol: how many slices a chunk has and how many FIFO steps a slice takes.
pub trait Proto {
    /// Slices per chunk (NCCL's `SlicePerChunk`).
    const SLICE_PER_CHUNK: u64;
    /// FIFO steps per slice (NCCL's `StepPerSlice`).
    const STEP_PER_SLICE: u64;
    /// 1: the received slot is a multicast handle, loaded with `ld_reduce` (NCCL's
    /// `MultimemSrcs`); 0: a unicast FIFO slot.
    const MULTIMEM_SRCS: usize;
    /// 1: the slot sent to is a multicast handle, stored to every device (NCCL's
    /// `MultimemDsts`); 0: a unicast FIFO slot.
    const MULTIMEM_DSTS: usize;
}

/// NCCL's `ProtoSimple<SLICE_PER_CHUNK, STEP_PER_SLICE, Unroll, MULTIMEM_SRCS,
/// MULTIMEM_DSTS>` (the unroll is the movers' [`UNROLL`]).
pub struct Simple<const SLICE_PER_CHUNK: u64, const STEP_PER_SLICE: u64, const MULTIMEM_SRCS: usize = 0, const MULTIMEM_DSTS: usize = 0>;

impl<const SLICE_PER_CHUNK: u64, const STEP_PER_SLICE: u64, const MULTIMEM_SRCS: usize, const MULTIMEM_DSTS: usize> Proto
    for Simple<SLICE_PER_CHUNK, STEP_PER_SLICE, MULTIMEM_SRCS, MULTIMEM_DSTS>
{
    const SLICE_PER_CHUNK: u64 = SLICE_PER_CHUNK;
    const STEP_PER_SLICE: u64 = STEP_PER_SLICE;
    const MULTIMEM_SRCS: usize = MULTIMEM_SRCS;
    const MULTIMEM_DSTS: usize = MULTIMEM_DSTS;
}

/// How many peers a primitives group has on each side, as a type (NCCL's `Fan*`): at
/// most [`MAX_ARITY`] each.
pub trait Fan {
    /// Most receive peers.
    const MAX_RECV: usize;
    /// Most send peers.
    const MAX_SEND: usize;
}

/// NCCL's `FanSymmetric<N>`: up to `N` peers on each side.
pub struct FanSymmetric<const N: usize>;

impl<const N: usize> Fan for FanSymmetric<N> {
    const MAX_RECV: usize = N;
    const MAX_SEND: usize = N;
}

/// NCCL's `FanAsymmetric<R, S>`: up to `R` receive and `S` send peers.
pub struct FanAsymmetric<const R: usize, const S: usize>;

impl<const R: usize, const S: usize> Fan for FanAsymmetric<R, S> {
    const MAX_RECV: usize = R;
    const MAX_SEND: usize = S;
}

/// A sizes-FIFO entry: the slot's bytes (low 48 bits), the connection's operation
/// count (15 bits), and [`SIZE_LAST`] on an operation's last step.
fn size_entry(bytes: u64, ops: u32, last: bool) -> u64 {
    (bytes & ((1 << 48) - 1)) | (u64::from(ops) & 0x7FFF) << 48 | if last { SIZE_LAST } else { 0 }
}

/// Posts `step` to every device's counter behind the multicast handle `handle` (an NVLS
/// end's post). Out of line: the loop over the peers would take registers from every
/// caller of the primitives (NVLS posts are the only ones through it). Ordering: as
/// [`Multicast::st_relaxed_u64`].
///
/// # Safety
/// As [`Multicast::st_relaxed_u64`].
#[inline(never)]
unsafe fn post_multicast<M: Multicast>(handle: u64, step: u64) {
    // SAFETY: this function's contract is `st_relaxed_u64`'s.
    unsafe { M::st_relaxed_u64(handle, step) }
}

/// `a / b` rounded up, for `a >= 0` and `b > 0`.
pub(crate) fn div_up(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// The error and detail of a group's `stopped` status.
pub fn decode_stop(status: u64) -> (LoopError, u32) {
    (LoopError::from_u32(status as u32).unwrap_or(LoopError::Timeout), (status >> 32) as u32)
}

/// Which user buffer an operand is.
pub mod buf {
    /// No user buffer.
    pub const NONE: u8 = 0;
    /// The input (send) buffer.
    pub const INPUT: u8 = 1;
    /// The output (receive) buffer.
    pub const OUTPUT: u8 = 2;
}

const ROLE_WAIT_RECV: u32 = 1;
const ROLE_WAIT_SEND: u32 = 2;
const ROLE_POST_RECV: u32 = 4;
const ROLE_POST_SEND: u32 = 8;
const ROLE_INPUT: u32 = 16;
const ROLE_OUTPUT: u32 = 32;
/// The polled word is a multicast handle (the conn's `CONN_NVLS_MIN_POLL`).
const NVLS_MIN_POLLING: u32 = 64;
/// The posted word is a multicast handle (the conn's `CONN_NVLS_MIN_POLL`): a post
/// reaches every device's copy.
const NVLS_MULTICAST_POST: u32 = 128;
/// Every thread of a group that exchanged addresses and published its output: the
/// previous rank writes its direct sends there (see [`Primitives::exchange_direct`]).
const DIRECT_RECV_ON: u32 = 256;

/// What a receiver publishes in place of its output's address when its output is not
/// mapped for the peer: the sender then sends through the FIFO. Never a buffer's address
/// (no buffer ends at the top of the address space).
pub const NOT_DIRECT: u64 = u64::MAX;

/// Where a group runs and what bounds its waits.
#[derive(Clone, Copy)]
pub struct GroupCtx {
    /// This thread's index in the group (`0..nthreads`).
    pub tid: u32,
    /// Threads in the group: a multiple of 32, at least 64.
    pub nthreads: u32,
    /// The group's index in the CTA (`0..MAX_GROUPS`): its barriers and shared memory.
    pub group: u32,
    /// The group's shared memory.
    pub shared: *mut PrimsShared,
    /// The host's abort flag.
    pub abort: *const u64,
    /// How long one wait may spin.
    pub spin_budget_ns: u64,
    /// This channel's statistics, or null: none kept.
    pub stats: *mut ChannelStats,
}

impl GroupCtx {
    /// Adds `v` to the counter `field` of the channel's statistics, when kept (a relaxed
    /// atomic add at GPU scope; orders nothing). `field` is called only with the non-null
    /// `stats`.
    ///
    /// # Safety
    /// `stats` is null or this channel's live `ChannelStats`, whose counters are changed
    /// only by atomic adds; `field` returns, for that pointer, the address of one of its
    /// `u64` counters (a projection of it).
    #[inline(always)]
    pub(crate) unsafe fn count(&self, field: impl FnOnce(*mut ChannelStats) -> *mut u64, v: u64) {
        if !self.stats.is_null() {
            // SAFETY: a non-null `stats` is this channel's live counters and `field` projects
            // it onto one of them (this function's contract): an aligned `u64` in device
            // memory, accessed only through `arch`.
            unsafe { u64::atomic_add_relaxed_gpu(field(self.stats), v) };
        }
    }

    /// The clock, when statistics are kept (0 otherwise: no clock read).
    #[inline(always)]
    pub(crate) fn clock(&self) -> u64 {
        if self.stats.is_null() { 0 } else { arch::globaltimer_ns() }
    }
}

/// One thread's part of a primitives group moving elements with the protocol `P`, to
/// at most `F::MAX_SEND` peers and from at most `F::MAX_RECV` (the fan `F`). `M` is the multicast flavour
/// used for `NVLS_MIN_POLL` connections. The element type and operator are values
/// ([`DataOp`]): the protocol code is shared by all of them.
pub struct Primitives<M: Multicast, P: Proto, F: Fan> {
    g: GroupCtx,
    nworkers: u32,
    nrecv: u32,
    nsend: u32,
    flags: u32,
    /// This thread's peer index (its role's connection).
    index: u32,
    /// The connection this thread's role uses (null: none); its step is written back.
    conn: *mut ConnInfo,
    step: u64,
    /// Operations run on `conn` before this one (tags the sizes FIFO).
    ops: u32,
    /// The word this thread waits on or posts to.
    step_ptr: *mut u64,
    step_cache: u64,
    fifo: u64,
    step_bytes: u64,
    sizes_fifo: u64,
    offs_fifo: u64,
    input: u64,
    output: u64,
    data: DataOp,
    /// WaitRecv/WaitSend threads: the connection's pointer-exchange word.
    ptr_exchange: u64,
    /// The group exchanged addresses for direct operations (every thread): see
    /// [`Primitives::exchange_direct`].
    direct: bool,
    /// The WaitSend thread of a direct group: the next rank's output buffer, or 0 where
    /// the next rank's output is not mapped for this one (sends go through the FIFO).
    direct_buff: u64,
    flavour: PhantomData<(M, P, F)>,
}

impl<M: MulticastMovers, P: Proto, F: Fan> Primitives<M, P, F> {
    /// Steps one chunk takes.
    pub const CHUNK_STEPS: u64 = P::SLICE_PER_CHUNK * P::STEP_PER_SLICE;

    /// Sets up this thread's roles for receiving from `recv` and sending to `send`
    /// (connection ends of this rank, whose FIFO steps are `step_bytes` long), with user
    /// buffers `input` and `output` (byte addresses), computing `data`. Loads the connections' steps,
    /// rounded up to a whole chunk, and returns the skipped credits to the senders.
    ///
    /// # Safety
    /// Every thread of the group calls this with the same arguments; the connections are
    /// valid ends (`ConnInfo` in this rank's device memory, their words as `conn.rs`
    /// describes) and used by no other group at the same time; `g.shared` is this group's
    /// shared memory, `g.abort` the host's abort flag and `g.stats` null or this channel's
    /// counters; all of them stay valid for as long as the returned value lives (its safe
    /// methods and `Drop` rely on it).
    #[inline(always)]
    pub unsafe fn new(
        g: GroupCtx,
        recv: &[*mut ConnInfo],
        send: &[*mut ConnInfo],
        step_bytes: u64,
        input: u64,
        output: u64,
        data: DataOp,
    ) -> Self {
        const { assert!(F::MAX_RECV <= MAX_ARITY && F::MAX_SEND <= MAX_ARITY) };
        let nworkers = if F::MAX_SEND > 0 && g.nthreads >= 3 * WARP_SIZE { g.nthreads - WARP_SIZE } else { g.nthreads };
        let (nrecv, nsend) = (recv.len().min(F::MAX_RECV) as u32, send.len().min(F::MAX_SEND) as u32);
        let group_of = g.tid / THREAD_PER_SYNC;
        let ngroups = g.nthreads / THREAD_PER_SYNC;
        let index = g.tid % THREAD_PER_SYNC;
        let mut flags = 0;
        if group_of == 0 {
            flags |= if index < nrecv { ROLE_WAIT_RECV } else { 0 } | if index == nrecv { ROLE_INPUT } else { 0 };
        } else if group_of == 1 {
            flags |= if index < nsend { ROLE_WAIT_SEND } else { 0 } | if index == nsend { ROLE_OUTPUT } else { 0 };
        } else if group_of == ngroups - 2 {
            flags |= if index < nrecv { ROLE_POST_RECV } else { 0 };
        } else if group_of == ngroups - 1 {
            flags |= if index < nsend { ROLE_POST_SEND } else { 0 };
        }
        let mut p = Self {
            g,
            nworkers,
            nrecv,
            nsend,
            flags,
            index,
            conn: core::ptr::null_mut(),
            step: 0,
            ops: 0,
            step_ptr: core::ptr::null_mut(),
            step_cache: 0,
            fifo: 0,
            step_bytes,
            sizes_fifo: 0,
            offs_fifo: 0,
            input,
            output,
            data,
            ptr_exchange: 0,
            direct: false,
            direct_buff: 0,
            flavour: PhantomData,
        };
        if flags & (ROLE_WAIT_RECV | ROLE_POST_RECV) != 0 {
            // SAFETY: this role needs `index < nrecv <= recv.len()`, and the caller gives valid
            // connection ends that no other group uses now (`new`'s contract), which is
            // `load_recv_conn`'s contract for this thread's receive roles.
            unsafe { p.load_recv_conn(recv[index as usize]) };
        }
        if flags & (ROLE_WAIT_SEND | ROLE_POST_SEND) != 0 {
            // SAFETY: as above: `index < nsend <= send.len()`, a valid connection end no other
            // group uses now.
            unsafe { p.load_send_conn(send[index as usize]) };
        }
        if g.tid == 0 {
            // SAFETY: `g.shared` is this group's `PrimsShared` in the CTA's shared memory
            // (`new`'s contract), whose `stopped` is an aligned `u64` accessed only through
            // `arch`'s shared-word functions; only thread 0 writes it here, and the barrier
            // below orders the write before any thread of the group reads it.
            unsafe { arch::st_volatile_shared_b64(&raw mut (*g.shared).stopped, 0) };
        }
        p.barrier();
        p
    }

    /// The chunk-rounded step of `conn`.
    fn rounded_step(conn: &ConnInfo) -> u64 {
        conn.step.div_ceil(Self::CHUNK_STEPS) * Self::CHUNK_STEPS
    }

    /// NCCL's `loadRecvConn`. Ordering: the credit return is a relaxed system-scope store.
    ///
    /// # Safety
    /// `conn` is a valid connection end as [`Primitives::new`] requires, and this thread
    /// has a receive role (WaitRecv or PostRecv) on it.
    #[inline(always)]
    unsafe fn load_recv_conn(&mut self, conn: *mut ConnInfo) {
        // SAFETY: `conn` is a valid, 16-byte-aligned `ConnInfo` in this rank's device memory
        // (this function's contract), which only this thread's roles read while the group runs.
        let c = unsafe { conn.read() };
        self.conn = conn;
        self.step = Self::rounded_step(&c);
        self.ops = c.ops;
        if self.flags & ROLE_POST_RECV != 0 {
            self.flags |= if c.flags & CONN_NVLS_MIN_POLL != 0 { NVLS_MULTICAST_POST } else { 0 };
            self.step_ptr = c.head as *mut u64;
            // SAFETY: a valid connection's `head` is the sender's 8-byte-aligned `u64` credit
            // counter (global memory, accessed only through `arch`), or with
            // `NVLS_MULTICAST_POST` a multicast handle naming every sender's (conn.rs), and the
            // PostRecv thread is its only writer on this side.
            unsafe { self.store_step() };
        }
        if self.flags & ROLE_WAIT_RECV != 0 {
            self.flags |= if c.flags & CONN_NVLS_MIN_POLL != 0 { NVLS_MIN_POLLING } else { 0 };
            self.step_ptr = c.tail as *mut u64;
            // SAFETY: `step_ptr` now is the connection's `tail`, and the flags say whether it
            // is a multicast handle (`CONN_NVLS_MIN_POLL`): `load_step`'s contract.
            self.step_cache = unsafe { self.load_step() };
            self.fifo = c.buff;
            self.sizes_fifo = c.sizes_fifo;
            self.offs_fifo = c.offs_fifo;
            self.ptr_exchange = c.ptr_exchange;
        }
    }

    /// NCCL's `loadSendConn`.
    ///
    /// # Safety
    /// `conn` is a valid connection end as [`Primitives::new`] requires, and this thread
    /// has a send role (WaitSend or PostSend) on it.
    #[inline(always)]
    unsafe fn load_send_conn(&mut self, conn: *mut ConnInfo) {
        // SAFETY: as in `load_recv_conn`: `conn` is a valid `ConnInfo` of this rank that only
        // this thread's roles read while the group runs.
        let c = unsafe { conn.read() };
        self.conn = conn;
        self.step = Self::rounded_step(&c);
        self.ops = c.ops;
        self.fifo = c.buff;
        if self.flags & ROLE_POST_SEND != 0 {
            self.flags |= if c.flags & CONN_NVLS_MIN_POLL != 0 { NVLS_MULTICAST_POST } else { 0 };
            self.step_ptr = c.tail as *mut u64;
            self.sizes_fifo = c.sizes_fifo;
        }
        if self.flags & ROLE_WAIT_SEND != 0 {
            self.flags |= if c.flags & CONN_NVLS_MIN_POLL != 0 { NVLS_MIN_POLLING } else { 0 };
            self.step_ptr = c.head as *mut u64;
            // SAFETY: `step_ptr` now is the connection's `head`, and the flags say whether it
            // is a multicast handle: `load_step`'s contract.
            self.step_cache = unsafe { self.load_step() };
            self.sizes_fifo = c.sizes_fifo;
            self.offs_fifo = c.offs_fifo;
            self.ptr_exchange = c.ptr_exchange;
        }
    }

    /// Exchanges addresses for direct operations on this group's collective (NCCL's
    /// `ptrExchange`): each WaitRecv thread publishes this rank's output buffer to its
    /// sender when `output_mapped` (the output is mapped for the peers), else
    /// [`NOT_DIRECT`]; each WaitSend thread takes what the next rank published and clears
    /// the word for the next operation. Each side of a connection then runs direct or
    /// through the FIFO on its own: a send goes straight into the next rank's output where
    /// that rank published it, and data arrives in this rank's output where it published
    /// its own; the direct operations fall back to the FIFO side by side. Both ends of
    /// every connection must call it for the same collectives (the connections carry
    /// `CONN_DIRECT`). Ordering: the word is published with a release store and taken
    /// with acquire loads; a receiver publishes only once it has read the sender's clear
    /// of the previous address (acquire), so no publish overwrites one not yet taken, even
    /// on a connection that moves no step in the operation (a broadcast's link into its
    /// root), where nothing else orders the sender's take before the next publish.
    ///
    /// # Safety
    /// Every thread of the group calls it with the same `output_mapped`, right after
    /// [`Primitives::new`]; the connections carry a pointer-exchange word; with
    /// `output_mapped` the output buffer is mapped for the previous rank.
    #[inline(never)]
    pub unsafe fn exchange_direct(&mut self, output_mapped: bool) {
        self.direct = true;
        if output_mapped {
            self.flags |= DIRECT_RECV_ON;
        }
        if self.flags & ROLE_WAIT_RECV != 0 {
            let published = if output_mapped { self.output } else { NOT_DIRECT };
            let word = self.ptr_exchange as *mut u64;
            // NCCL's "wait for consumer to consume previous value before trampling it": a
            // connection that carries no step in an operation (a broadcast's link into its
            // root) orders nothing between the sender's take of this operation's address
            // and our publish of the next one, so wait for the sender's clear.
            // SAFETY: `g.abort` is the host's abort flag, readable for the value's life
            // (`new`'s contract), and the guard lives only in this call.
            let mut guard = unsafe { SpinGuard::new(self.g.abort, self.g.spin_budget_ns) };
            // SAFETY: a WaitRecv thread loaded `ptr_exchange` from its connection, which
            // carries a pointer-exchange word (this function's contract): an 8-byte-aligned
            // `u64` in the sender's memory, accessed only through `arch`.
            while unsafe { arch::ld_acquire_sys_global(word) } != 0 {
                if !self.keep_waiting(&mut guard, WaitSite::SendCredit) {
                    break;
                }
            }
            if self.stopped() == 0 {
                // SAFETY: as above.
                unsafe { arch::st_release_sys_global(word, published) };
            }
        }
        if self.flags & ROLE_WAIT_SEND != 0 {
            let word = self.ptr_exchange as *mut u64;
            // SAFETY: `g.abort` is the host's abort flag, readable for the value's life
            // (`new`'s contract), and the guard lives only in this call.
            let mut guard = unsafe { SpinGuard::new(self.g.abort, self.g.spin_budget_ns) };
            loop {
                // SAFETY: `word` is the send connection's pointer-exchange word, loaded by this
                // WaitSend thread (this function's contract: the connection carries one): an
                // 8-byte-aligned `u64` in this rank's memory, accessed only through `arch`.
                let published = unsafe { arch::ld_acquire_sys_global(word) };
                if published != 0 {
                    self.direct_buff = if published == NOT_DIRECT { 0 } else { published };
                    // SAFETY: as above; this WaitSend thread is the only one on this side that
                    // clears the word.
                    unsafe { arch::st_relaxed_sys_global(word, 0) };
                    break;
                }
                if !self.keep_waiting(&mut guard, WaitSite::SendCredit) {
                    break;
                }
            }
        }
        self.barrier();
    }

    /// Reads the polled step counter. Ordering: acquire at system scope (the peer's
    /// fence and store publish the data of every step below the value).
    ///
    /// # Safety
    /// `self.step_ptr` is the polled step counter of this thread's connection: an
    /// 8-byte-aligned `u64` in global memory, or with `NVLS_MIN_POLLING` an `M` handle
    /// naming such counters.
    #[inline(always)]
    unsafe fn load_step(&self) -> u64 {
        if self.flags & NVLS_MIN_POLLING != 0 {
            // SAFETY: with `NVLS_MIN_POLLING` the polled word is a multicast handle of flavour
            // `M` naming 8-byte-aligned step counters (`CONN_NVLS_MIN_POLL`; this function's
            // contract).
            unsafe { M::ld_acquire_min_u64(self.step_ptr as u64) }
        } else {
            // SAFETY: `step_ptr` is the connection's polled step counter, an 8-byte-aligned
            // `u64` in global memory accessed only through `arch` (this function's contract).
            unsafe { arch::ld_acquire_sys_global(self.step_ptr) }
        }
    }

    /// Posts `self.step` to the posted step counter. Ordering: a relaxed system-scope
    /// store (to every device's copy with `NVLS_MULTICAST_POST`); the caller fences
    /// before it where data must be published first.
    ///
    /// # Safety
    /// `self.step_ptr` is the posted step counter of this thread's connection: an
    /// 8-byte-aligned `u64` in global memory that only this thread writes on this side,
    /// or with `NVLS_MULTICAST_POST` an `M` handle naming such counters.
    #[inline(always)]
    unsafe fn store_step(&self) {
        if self.flags & NVLS_MULTICAST_POST != 0 {
            // SAFETY: with `NVLS_MULTICAST_POST` the posted word is a multicast handle of
            // flavour `M` naming 8-byte-aligned step counters this thread may write (this
            // function's contract), which is `post_multicast`'s.
            unsafe { post_multicast::<M>(self.step_ptr as u64, self.step) }
        } else {
            // SAFETY: `step_ptr` is the connection's posted step counter, an 8-byte-aligned
            // `u64` in global memory accessed only through `arch` (this function's contract).
            unsafe { arch::st_relaxed_sys_global(self.step_ptr, self.step) }
        }
    }

    /// Elements of the user buffers and FIFO slots one slice may hold.
    fn slice_capacity(&self) -> i64 {
        (self.step_bytes / self.data.elt() * P::STEP_PER_SLICE) as i64
    }

    /// Elements one chunk (`SLICE_PER_CHUNK` slices) may hold.
    pub fn chunk_capacity(&self) -> i64 {
        (self.step_bytes / self.data.elt() * Self::CHUNK_STEPS) as i64
    }

    /// True once [`Primitives::exchange_direct`] has exchanged addresses: the algorithms
    /// then call the direct operations, each side of which runs direct or through the
    /// FIFO as the exchange found.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The barrier of the whole group: named barrier `15 - 2 × group` (15, 13, 11 for
    /// the `MAX_GROUPS` groups; the loop's own barriers are 0 and 1).
    #[inline(always)]
    fn barrier(&self) {
        arch::barrier_sync(15 - 2 * self.g.group, self.g.nthreads);
    }

    /// The barrier of the group's workers: named barrier `14 - 2 × group` (14, 12, 10).
    #[inline(always)]
    fn sub_barrier(&self) {
        arch::barrier_sync(14 - 2 * self.g.group, self.nworkers);
    }

    /// Why the group stopped (0: it has not). Ordering: relaxed (`stopped` carries only
    /// itself; the group's barriers order what each thread did before it).
    #[inline(always)]
    fn stopped(&self) -> u64 {
        // SAFETY: `g.shared` is this group's `PrimsShared` in the CTA's shared memory for the
        // value's life (`new`'s contract), and `stopped` is an aligned `u64` in it, accessed
        // only through `arch`'s shared-word functions: waiting threads may `stop` while
        // others read.
        unsafe { arch::ld_volatile_shared_b64(&raw const (*self.g.shared).stopped) }
    }

    /// Records why the group stops (the first reason wins within the group). Ordering:
    /// relaxed, as [`Primitives::stopped`].
    #[inline(always)]
    fn stop(&self, status: u64) {
        if self.stopped() == 0 {
            // SAFETY: as in `stopped`: this group's shared word, written with one relaxed
            // store; when two threads stop at once, either reason may be kept.
            unsafe { arch::st_volatile_shared_b64(&raw mut (*self.g.shared).stopped, status) };
        }
    }

    /// One more round of a bounded wait at `site`: false (and the group stopped with
    /// `Aborted` or `Timeout`) when the host aborted or the spin budget ran out.
    #[inline(always)]
    fn keep_waiting(&self, guard: &mut SpinGuard, site: WaitSite) -> bool {
        match guard.tick() {
            Ok(()) => true,
            Err(Interrupted::Aborted) => {
                self.stop(LoopError::Aborted.status(0));
                false
            }
            Err(Interrupted::TimedOut) => {
                self.stop(LoopError::Timeout.status(site as u32));
                false
            }
        }
    }

    /// The outcome of the group's operations so far: every thread of the group must call
    /// it after the group's last operation (it synchronises the group).
    #[inline(always)]
    pub fn outcome(&self) -> Result<(), (LoopError, u32)> {
        self.barrier();
        match self.stopped() {
            0 => Ok(()),
            s => Err(decode_stop(s)),
        }
    }

    /// NCCL's `waitPeer`: the WaitRecv/WaitSend threads wait until their peer has data
    /// (or room) for one slice, then publish the slot's address for the workers.
    #[inline(always)]
    /// After an address exchange, a direct send's pointer is the next rank's output at
    /// element `direct_ix` where that rank published it, and a direct receive's is this
    /// rank's own output there where this rank published it (the sender wrote it
    /// already); the FIFO slot otherwise.
    ///
    /// # Safety
    /// `self` was built by [`Primitives::new`], whose contract still holds.
    #[allow(clippy::too_many_arguments)]
    unsafe fn wait_peer<const RECV: bool, const SEND: bool>(
        &mut self,
        src: bool,
        dst: bool,
        nelts: i64,
        last: bool,
        direct_recv: bool,
        direct_send: bool,
        direct_ix: i64,
    ) {
        let is_send = if SEND && RECV { self.flags & ROLE_WAIT_SEND != 0 } else { SEND };
        let role = (if RECV { ROLE_WAIT_RECV } else { 0 }) | (if SEND { ROLE_WAIT_SEND } else { 0 });
        if self.flags & role == 0 {
            return;
        }
        let room = if is_send { NCCL_STEPS } else { 0 };
        let need = self.step + P::STEP_PER_SLICE;
        if self.step_cache + room < need && self.stopped() == 0 {
            let waited_from = self.g.clock();
            // SAFETY: `g.abort` is the host's abort flag, readable for the value's life
            // (`new`'s contract), and the guard lives only in this call.
            let mut guard = unsafe { SpinGuard::new(self.g.abort, self.g.spin_budget_ns) };
            loop {
                if !is_send {
                    arch::site(Site::PrimsRecvPoll);
                }
                // SAFETY: `step_ptr` is this waiting thread's polled word, as `load_*_conn` set
                // it (with the flags that say whether it is a multicast handle): `load_step`'s
                // contract.
                self.step_cache = unsafe { self.load_step() };
                if self.step_cache + room >= need {
                    break;
                }
                if self.stopped() != 0 {
                    break;
                }
                if !self.keep_waiting(&mut guard, if is_send { WaitSite::SendCredit } else { WaitSite::RecvData }) {
                    break;
                }
            }
            let waited = self.g.clock().wrapping_sub(waited_from);
            if is_send {
                // SAFETY: `g.stats` is null or this channel's live `ChannelStats` (`new`'s
                // contract), and the closure, called only with it non-null, projects it onto
                // one of its counters (only the address is taken): `count`'s contract.
                unsafe { self.g.count(|s| &raw mut (*s).wait_credit_ns, waited) };
            } else {
                // SAFETY: as above.
                unsafe { self.g.count(|s| &raw mut (*s).wait_data_ns, waited) };
            }
        }
        let slot = self.step % NCCL_STEPS;
        let bytes = nelts.max(0) as u64 * self.data.elt();
        if self.sizes_fifo != 0 && self.stopped() == 0 {
            let size_ptr = (self.sizes_fifo as *mut u64).wrapping_add(slot as usize);
            let size = size_entry(bytes, self.ops, last);
            if is_send {
                // SAFETY: a non-zero `sizes_fifo` is `[u64; NCCL_STEPS]` in the receiver's
                // memory (conn.rs) and `slot < NCCL_STEPS`, so the entry is an aligned `u64` in
                // it; the sender's waiting thread writes the slot it has credits for, accessed
                // only through `arch`.
                unsafe { arch::st_volatile_global(size_ptr, size) };
            // SAFETY: as above: the receiver's waiting thread reads the entry of a slot the
            // sender has posted.
            } else if unsafe { arch::ld_volatile_global(size_ptr) } != size {
                self.stop(LoopError::PeerMismatch.status(0));
            }
        }
        let offset = if self.offs_fifo != 0 {
            // SAFETY: a non-zero `offs_fifo` is `[u64; NCCL_STEPS]` (conn.rs) and `slot <
            // NCCL_STEPS`: an aligned `u64` accessed only through `arch`.
            unsafe { arch::ld_volatile_global((self.offs_fifo as *const u64).wrapping_add(slot as usize)) }
        } else {
            slot * self.step_bytes
        };
        // SAFETY: `g.shared` is this group's `PrimsShared` (`new`'s contract); `srcs` and
        // `dsts` are `[u64; MAX_ARITY + 1]`, and `dst`/`src` (0 or 1) plus `index <
        // THREAD_PER_SYNC = MAX_ARITY` (below) stays within them, so both offsets are in
        // bounds.
        let ptrs = unsafe {
            if is_send {
                (&raw mut (*self.g.shared).dsts).cast::<u64>().add(dst as usize)
            } else {
                (&raw mut (*self.g.shared).srcs).cast::<u64>().add(src as usize)
            }
        };
        let direct_at = |base: u64| base.wrapping_add((direct_ix as u64).wrapping_mul(self.data.elt()));
        let ptr = match is_send {
            true if direct_send && self.direct_buff != 0 => direct_at(self.direct_buff),
            false if direct_recv && self.flags & DIRECT_RECV_ON != 0 => direct_at(self.output),
            _ => self.fifo + offset,
        };
        // SAFETY: `ptrs + index` is in bounds (above); this slot is written only by this
        // waiting thread, whose peer index it is, and the workers read it after the group's
        // sub-barrier that follows.
        unsafe { ptrs.add(self.index as usize).write_volatile(ptr) };
        self.step += P::STEP_PER_SLICE;
    }

    /// NCCL's `postPeer`: PostRecv threads return a slice's credits, PostSend threads
    /// publish a slice's data. Ordering: a send is published with `fence.acq_rel.sys`
    /// then a relaxed system-scope store of the tail (a release), when data (or a sizes
    /// FIFO entry) was stored.
    /// A credit return is a relaxed store after the group barrier: the slot's loads have
    /// returned (their values were stored before the barrier). A stopped group posts
    /// nothing.
    #[inline(always)]
    fn post_peer<const RECV: bool, const SEND: bool>(&mut self, data_stored: bool) {
        let role = (if RECV { ROLE_POST_RECV } else { 0 }) | (if SEND { ROLE_POST_SEND } else { 0 });
        if self.flags & role == 0 {
            return;
        }
        self.step += P::STEP_PER_SLICE;
        if self.stopped() != 0 {
            return;
        }
        // The sizes FIFO entry is written even for an empty slice, by another thread, and
        // so is a direct group's pointer-exchange clear: they too must be published
        // before the tail.
        if SEND && self.flags & ROLE_POST_SEND != 0 && (data_stored || self.sizes_fifo != 0 || self.direct) {
            arch::site(if data_stored { Site::PrimsSendFence } else { Site::PrimsEmptySliceFence });
            arch::fence_acq_rel_sys();
        }
        // SAFETY: a posting thread's `step_ptr` is its connection's `head` (PostRecv) or `tail`
        // (PostSend): an 8-byte-aligned `u64` in the peer's memory that only this thread writes
        // on this side, or with `NVLS_MULTICAST_POST` a multicast handle naming every peer's
        // (`new`'s contract: valid connections), which is `store_step`'s contract.
        unsafe { self.store_step() };
    }

    /// The user buffer `which` at element `ix`, as a byte address.
    #[inline(always)]
    fn user(&self, which: u8, ix: i64) -> u64 {
        let base = if which == buf::INPUT { self.input } else { self.output };
        base.wrapping_add((ix as u64).wrapping_mul(self.data.elt()))
    }

    /// NCCL's `genericOp` for one chunk of `nelem` elements: receives from the peer when
    /// `RECV`, reduces with the user buffer `SRC_BUF` at `src_ix`, stores to the user
    /// buffer `DST_BUF` at `dst_ix`, and sends to the peer when `SEND`. `NSRCS` and
    /// `NDSTS` are the resulting operand counts (one peer per side). The first
    /// `PRE_OP_SRCS` sources (the user input) get the operator's pre-op; `POST_OP`
    /// applies its post-op. A plain copy moves bits through the copy code shared by
    /// every type of the element's size. After an address exchange (see
    /// [`Primitives::exchange_direct`]), `DIRECT_SEND` writes into the next rank's output
    /// at `dst_ix` instead of the FIFO where that rank published it, and `DIRECT_RECV`
    /// finds the data already in this rank's output at `dst_ix` (nothing to copy there)
    /// where this rank published it.
    ///
    /// # Safety
    /// Every thread of the group calls this with the same arguments; the user buffers
    /// hold the elements addressed; `nelem` is at most one chunk.
    #[inline(always)]
    pub(crate) unsafe fn generic_op<
        const RECV: bool,
        const SEND: bool,
        const SRC_BUF: u8,
        const DST_BUF: u8,
        const NSRCS: usize,
        const NDSTS: usize,
        const PRE_OP_SRCS: usize,
        const POST_OP: bool,
        const DIRECT_RECV: bool,
        const DIRECT_SEND: bool,
    >(
        &mut self,
        src_ix: i64,
        dst_ix: i64,
        nelem: i64,
    ) {
        const { assert!(NSRCS == RECV as usize + (SRC_BUF != buf::NONE) as usize) };
        const { assert!(NDSTS == SEND as usize + (DST_BUF != buf::NONE) as usize) };
        // A multicast slot is the one source or the one destination besides at most one
        // more operand (`movers::multimem`).
        const { assert!(P::MULTIMEM_SRCS + P::MULTIMEM_DSTS == 0 || (NSRCS == 1 && NDSTS == 1)) };
        const { assert!(P::MULTIMEM_SRCS <= RECV as usize && P::MULTIMEM_DSTS <= SEND as usize) };
        let nelem = nelem.max(0);
        let max_slice = self.slice_capacity();
        if nelem > max_slice * P::SLICE_PER_CHUNK as i64 {
            // The algorithms never pass more than a chunk: data would be lost.
            arch::trap();
        }
        let mut slice_size = (div_up(nelem, 16 * P::SLICE_PER_CHUNK as i64) * 16).max(max_slice / 32).min(max_slice);
        let (mut slice, mut offset) = (0u64, 0i64);
        let (src_role, dst_role) = (
            if SRC_BUF == buf::INPUT { ROLE_INPUT } else { ROLE_OUTPUT },
            if DST_BUF == buf::INPUT { ROLE_INPUT } else { ROLE_OUTPUT },
        );
        if self.g.tid < self.nworkers && offset < nelem {
            loop {
                slice_size = slice_size.min(nelem - offset);
                let shared = self.g.shared;
                if SRC_BUF != buf::NONE && self.flags & src_role != 0 {
                    // SAFETY: `g.shared` is this group's `PrimsShared` (`new`'s contract); slot
                    // 0 of `srcs` is written only by the Input thread, and read by the workers
                    // after the sub-barrier below.
                    unsafe { (&raw mut (*shared).srcs[0]).write_volatile(self.user(SRC_BUF, src_ix + offset)) };
                }
                if DST_BUF != buf::NONE && self.flags & dst_role != 0 {
                    // SAFETY: as above, for `dsts[0]` and the Output thread.
                    unsafe { (&raw mut (*shared).dsts[0]).write_volatile(self.user(DST_BUF, dst_ix + offset)) };
                }
                let last = offset + slice_size >= nelem;
                let (src, dst) = (SRC_BUF != buf::NONE, DST_BUF != buf::NONE);
                // SAFETY: `wait_peer`'s contract: this thread's connection was loaded by `new`
                // (valid, used by this group only), and every worker calls it for this slice.
                unsafe { self.wait_peer::<RECV, SEND>(src, dst, slice_size, last, DIRECT_RECV, DIRECT_SEND, dst_ix + offset) };
                self.sub_barrier();
                let slice_from = if self.g.tid == 0 { self.g.clock() } else { 0 };
                let work = if self.stopped() != 0 { 0 } else { slice_size as usize };
                // SAFETY: this group's shared memory (`new`'s contract); `s < NSRCS <= 2 <=
                // MAX_ARITY + 1`, and the writers (Input and WaitRecv threads) stored these
                // words before the sub-barrier above.
                let srcs: [u64; NSRCS] = core::array::from_fn(|s| unsafe { (&raw const (*shared).srcs[s]).read_volatile() });
                // SAFETY: as above, for `dsts` (Output and WaitSend threads).
                let dsts: [u64; NDSTS] = core::array::from_fn(|d| unsafe { (&raw const (*shared).dsts[d]).read_volatile() });
                let w = Movers { tid: self.g.tid, nthreads: self.nworkers };
                let dsts = [dsts[0], dsts[NDSTS - 1]];
                // A direct receive's source is this rank's own output, where the data
                // already is: only a send onwards remains.
                let received_in_place = DIRECT_RECV && self.flags & DIRECT_RECV_ON != 0 && SRC_BUF == buf::NONE;
                // SAFETY: the sub-barrier above published this slice's pointers: the user
                // buffers at `src_ix + offset`/`dst_ix + offset`, which hold `work <=
                // slice_size` elements (this function's contract), and FIFO space for
                // the whole slice (`slice_size <= slice_capacity`; or the next rank's output
                // with direct operations), element-aligned; the `nworkers` workers (a multiple of
                // 32) call this with the same arguments; the credits and data waits done by
                // `wait_peer` make the FIFO slots this group's to read or write until the posts
                // below.
                unsafe {
                    if P::MULTIMEM_SRCS + P::MULTIMEM_DSTS > 0 {
                        // A multicast slot on either side (NVLS): one source, one destination,
                        // the received side (when `MULTIMEM_SRCS`) and the sent side (when
                        // `MULTIMEM_DSTS`) being the slot's multicast handle.
                        M::multimem(w, self.data, P::MULTIMEM_SRCS > 0, P::MULTIMEM_DSTS > 0, POST_OP, srcs[0], dsts[0], work);
                    } else if received_in_place {
                        if NDSTS == 2 {
                            movers::transform(w, self.data, false, false, srcs[0], [dsts[1], dsts[1]], 1, work);
                        }
                    } else if NSRCS == 2 {
                        movers::reduce::<2, 1>(w, self.data, POST_OP, [srcs[0], srcs[NSRCS - 1]], 2, dsts, NDSTS, work);
                    } else {
                        movers::transform(w, self.data, PRE_OP_SRCS > 0, POST_OP, srcs[0], dsts, NDSTS, work);
                    }
                }
                self.barrier();
                if self.g.tid == 0 {
                    // SAFETY: `g.stats` is null or this channel's live `ChannelStats` (`new`'s
                    // contract), and each closure, called only with it non-null, projects it onto
                    // one of its counters (only the address is taken): `count`'s contract.
                    unsafe {
                        self.g.count(|s| &raw mut (*s).copy_ns, self.g.clock().wrapping_sub(slice_from));
                        self.g.count(|s| &raw mut (*s).slices, 1);
                        self.g.count(|s| &raw mut (*s).bytes, work as u64 * self.data.elt());
                    }
                }
                self.post_peer::<RECV, SEND>(slice_size > 0);
                offset += slice_size;
                slice += 1;
                if !(slice < P::SLICE_PER_CHUNK && offset < nelem) {
                    break;
                }
            }
        }
        // Non-workers, and workers once the remaining slices are empty: the waits still
        // run (an empty slice is a step on both sides), so every role's step agrees.
        while slice < P::SLICE_PER_CHUNK {
            slice_size = slice_size.min(nelem - offset).max(0);
            let (src, dst) = (SRC_BUF != buf::NONE, DST_BUF != buf::NONE);
            // SAFETY: as in the loop above: `wait_peer`'s contract holds (this thread's
            // connection was loaded by `new`), and every thread of the group runs these empty
            // slices.
            unsafe { self.wait_peer::<RECV, SEND>(src, dst, 0, true, DIRECT_RECV, DIRECT_SEND, dst_ix + offset) };
            self.barrier();
            self.post_peer::<RECV, SEND>(slice_size > 0);
            offset += slice_size;
            slice += 1;
        }
    }

    /// NCCL's `ScatterGatherOp`: per slice, sends `peer_elem` elements of the input to
    /// each send peer `i` (from `inp_ix + i × peer_offset`, skipping the block of peer
    /// `skip`) when `SEND`, or receives each receive peer's block into the output when
    /// `RECV`; `total_elem` bounds the user buffer.
    ///
    /// # Safety
    /// As [`Primitives::generic_op`].
    #[inline(always)]
    pub(crate) unsafe fn scatter_gather_op<const RECV: bool, const SEND: bool>(
        &mut self,
        user_ix: i64,
        total_elem: i64,
        peer_elem: i64,
        peer_offset: i64,
        skip: i32,
        shift: u32,
    ) {
        let max_slice = self.slice_capacity();
        if peer_elem > max_slice * P::SLICE_PER_CHUNK as i64 {
            arch::trap();
        }
        let data_size = (div_up(peer_elem.max(0), 16 * P::SLICE_PER_CHUNK as i64) * 16).max(max_slice / 32).min(max_slice);
        let mut offset = 0i64;
        let shared = self.g.shared;
        for _ in 0..P::SLICE_PER_CHUNK {
            let real_size = data_size.min(peer_elem - offset).max(0);
            let mut stored = false;
            if self.g.tid < self.nworkers {
                let (user_role, npeers) = if SEND { (ROLE_INPUT, self.nsend) } else { (ROLE_OUTPUT, self.nrecv) };
                if self.flags & user_role != 0 {
                    // SAFETY: only the address of slot 0 of `srcs`/`dsts` in this group's
                    // shared memory (`new`'s contract) is taken.
                    let (which, slot) = unsafe { if SEND { (buf::INPUT, &raw mut (*shared).srcs[0]) } else { (buf::OUTPUT, &raw mut (*shared).dsts[0]) } };
                    // SAFETY: the slot is in this group's shared memory; only the Input (send)
                    // or Output (receive) thread writes it, and the workers read it after the
                    // sub-barrier below.
                    unsafe { slot.write_volatile(self.user(which, user_ix + offset)) };
                }
                let last = offset + real_size >= peer_elem;
                // SAFETY: this thread's connection was loaded by `new` (valid, used by this
                // group only), and every worker calls it for this slice: `wait_peer`'s
                // contract.
                unsafe { self.wait_peer::<RECV, SEND>(SEND, RECV, real_size, last, false, false, 0) };
                self.sub_barrier();
                if self.stopped() == 0 {
                    for j in 0..npeers {
                        let i = (j + shift) % npeers;
                        let mut p_offset = i64::from(i) * peer_offset;
                        if skip >= 0 && i as i32 >= skip {
                            p_offset += peer_elem;
                        }
                        let real_peer = real_size.min(total_elem - p_offset - offset).max(0);
                        if real_peer == 0 {
                            continue;
                        }
                        let elt = self.data.elt();
                        // SAFETY: this group's shared memory (`new`'s contract); `i < npeers <=
                        // MAX_ARITY`, so `i` indexes within `[u64; MAX_ARITY + 1]`, and the
                        // words were stored before the sub-barrier above.
                        let (src, dst) = unsafe {
                            if SEND {
                                let user = (&raw const (*shared).srcs[0]).read_volatile();
                                (user + p_offset as u64 * elt, (&raw const (*shared).dsts[i as usize]).read_volatile())
                            } else {
                                let user = (&raw const (*shared).dsts[0]).read_volatile();
                                ((&raw const (*shared).srcs[i as usize]).read_volatile(), user + p_offset as u64 * elt)
                            }
                        };
                        // Scatter pre-scales the input (NCCL's non-direct case); gather copies.
                        let w = Movers { tid: self.g.tid, nthreads: self.nworkers };
                        // SAFETY: the user block at `p_offset + offset` holds `real_peer`
                        // elements (bounded by `total_elem`, this function's contract) and the
                        // peer's FIFO slot holds a slice (`real_peer <= data_size <=
                        // slice_capacity`), element-aligned; the `nworkers` workers (a multiple
                        // of 32) call this with the same arguments; `wait_peer` made the slot
                        // this group's until the post below.
                        unsafe { movers::transform(w, self.data, SEND, false, src, [dst, dst], 1, real_peer as usize) };
                        stored = true;
                    }
                }
            }
            self.barrier();
            self.post_peer::<RECV, SEND>(stored || real_size > 0);
            offset += real_size;
        }
    }
}

impl<M: Multicast, P: Proto, F: Fan> Drop for Primitives<M, P, F> {
    /// Writes the step (posting threads: they hold their side's final step) and the
    /// operation count (waiting threads) back to the connection for the next operation.
    /// The next operation's threads read them after the CTA barrier that ends the item.
    fn drop(&mut self) {
        if self.conn.is_null() {
            return;
        }
        if self.flags & (ROLE_POST_SEND | ROLE_POST_RECV) != 0 {
            // SAFETY: `conn` is non-null, so `new` loaded it: a valid `ConnInfo` of this rank
            // used by this group only; the next item's threads read `step` after the CTA
            // barrier that ends this one.
            unsafe { (&raw mut (*self.conn).step).write_volatile(self.step) };
        }
        if self.flags & (ROLE_WAIT_SEND | ROLE_WAIT_RECV) != 0 {
            // SAFETY: as above; each connection's waiting thread is the only writer of its
            // `ops`.
            unsafe { (&raw mut (*self.conn).ops).write_volatile(self.ops.wrapping_add(1)) };
        }
    }
}
