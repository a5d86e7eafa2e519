//! Collective matmuls on a communicator's ranks ([`Comm::matmul`]): the ring of
//! [`crate::matmul::RingMatmul`] over a symmetric heap of its own, made from the
//! communicator (its ranks, its streams, its module, its time budget) and aborted with it.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use device_rt::matmul::{Collective, Shape};

use super::across::{Failure, failure_of};
use super::{Comm, CommAbortHandle, check_buffer, join};
use crate::matmul::{RingMatmul, heap_bytes};
use crate::memory::buffer_info;
use crate::op::Element;
use crate::shmem::{Heap, HeapAbortHandle};
use crate::{Error, Result};

/// Collective matmuls of one shape on the ranks of a communicator: one for every rank of
/// this process ([`Comm::matmul`]). Its calls run on the ranks' streams, in order with
/// their collectives; [`Comm::abort`] (or another process's rank failing) ends its waits
/// too.
pub struct CommMatmul {
    ring: RingMatmul,
    /// The heap that holds the ring's workspace; taken by the drop only.
    heap: Option<Heap>,
    heap_abort: HeapAbortHandle,
    /// The communicator's abort handle, and this process's ranks: rank and stream.
    aborts: CommAbortHandle,
    ranks: Vec<(u32, Arc<CudaStream>)>,
    /// Where another process's rank's failure is told, for a communicator across
    /// processes.
    failure: Option<Failure>,
}

impl Comm {
    /// Collective matmuls of `collective` for `m`, `k`, `n` of `T` (f16 or bf16; see
    /// `device_rt::matmul::Shape` for what each dimension is, `docs/matmul.md` for the
    /// ring) on the ranks `comms` of this process, each running on its rank's stream:
    /// every rank of a communicator made in one process ([`Comm::from_devices`]), in rank
    /// order; or this process's one rank of a communicator across processes
    /// ([`Comm::init_rank`]), whose every rank makes its own at once (the ranks meet
    /// again, within the communicator's timeout; every rank makes its collective matmuls
    /// in the same order). Ranks of one process that share a device with each other run
    /// their calls only from one call for all of them: make those with
    /// [`Comm::from_devices`].
    ///
    /// Makes a symmetric heap for the ring's workspace and loads cuBLASLt's kernels:
    /// make it while the ranks are idle (CUDA may hold an allocation, or a kernel's first
    /// load, until a rank's running loop sleeps; a loop pinned awake by a captured call
    /// that needs it never sleeps, so make the matmuls before such a capture). Bad shapes, ranks that are not what
    /// this says, and a communicator that stopped are refused before anything is made.
    pub fn matmul<T: Element>(comms: &[&Comm], collective: Collective, m: u64, k: u64, n: u64) -> Result<CommMatmul> {
        let Some(first) = comms.first() else {
            return Err(Error::InvalidArgument("a collective matmul on no rank".into()));
        };
        let shape = Shape { collective, nranks: first.nranks, m, k, n, dtype: T::DTYPE };
        shape.check().map_err(|e| Error::InvalidArgument(format!("collective matmul: {e}")))?;
        for comm in comms {
            if let Some(e) = comm.async_error() {
                return Err(e);
            }
        }
        let streams: Vec<Arc<CudaStream>> = comms.iter().map(|c| c.stream.clone()).collect();
        let budget = first.lp.spin_budget();
        let ranks: Vec<(u32, bool)> = comms.iter().map(|c| (c.rank, c.aborts.same_ranks(&first.aborts))).collect();
        check_ranks(&ranks, first.nranks, first.across.as_ref().map(|a| a.ranks_on_device))?;
        let (mut heap, failure) = match &first.across {
            Some(across) => {
                let bootstrap = join::meet_again(&across.id, &format!("matmul {}", across.next_matmul()), first.nranks as usize, first.rank as usize, across.timeout)?;
                (Heap::join(&first.stream, heap_bytes(&shape), budget, bootstrap)?, Some(across.failed.clone()))
            }
            None => (Heap::new(&streams, heap_bytes(&shape), budget)?, None),
        };
        let modules = comms.iter().map(|c| c.module.clone()).collect();
        let ring = RingMatmul::with_modules::<T>(&mut heap, collective, m, k, n, streams.clone(), Some(modules))?;
        let heap_abort = heap.abort_handle();
        first.aborts.link(heap_abort.clone());
        Ok(CommMatmul { ring, heap: Some(heap), heap_abort, aborts: first.aborts.clone(), ranks: comms.iter().map(|c| c.rank).zip(streams).collect(), failure })
    }
}

/// Refuses ranks a collective matmul cannot take: `ranks` holds each given rank's number
/// and whether it is of the first one's communicator, of `nranks` ranks; `across` is, for
/// a communicator across processes, how many ranks of its process share the first one's
/// device (itself included). Across processes: one rank, alone on its device in its
/// process (ranks sharing a device need their work enqueued by one call). In one process:
/// every rank of one communicator, in rank order.
fn check_ranks(ranks: &[(u32, bool)], nranks: u32, across: Option<u32>) -> Result<()> {
    let numbers: Vec<u32> = ranks.iter().map(|&(r, _)| r).collect();
    match across {
        Some(_) if ranks.len() != 1 => Err(Error::InvalidArgument(format!("a collective matmul on ranks {numbers:?} of a communicator across processes: each rank makes its own"))),
        Some(on_device) if on_device > 1 => Err(Error::InvalidArgument(format!(
            "rank {} shares its device with {} other rank(s) of its process: a collective matmul runs such ranks from one call for all of them (make them with Comm::from_devices)",
            numbers[0],
            on_device - 1
        ))),
        Some(_) => Ok(()),
        None if ranks.len() == nranks as usize && ranks.iter().enumerate().all(|(i, &(r, same))| r as usize == i && same) => Ok(()),
        None => Err(Error::InvalidArgument(format!("a collective matmul on ranks {numbers:?} (of one communicator: {}) of a communicator of {nranks} made in one process: it takes every rank of one communicator, in order", ranks.iter().all(|&(_, same)| same)))),
    }
}

impl CommMatmul {
    /// The shape every call takes.
    pub fn shape(&self) -> Shape {
        self.ring.shape()
    }

    /// How the copy lanes move data: [`RingMatmul::set_sm_copies`].
    pub fn set_sm_copies(&mut self, ctas: Option<u32>) -> Result<()> {
        self.ring.set_sm_copies(ctas)
    }

    /// One call on every rank of this process, enqueued on each rank's stream (it returns
    /// before the work is done): `args[i]` is the `i`-th rank's `(A, B, C)` (in the order
    /// [`Comm::matmul`] was given them), of the shape's sizes (`Shape::lens`, row-major).
    /// Refused before anything is enqueued: an element type that is not the shape's, wrong
    /// lengths, a stream capturing a CUDA graph, a buffer on another device than its
    /// rank's or past the end of its allocation, a communicator that stopped (its error: a
    /// rank's loop's, [`Error::Aborted`], another process's rank's failure). A wait that ends early mid-call (an abort, the
    /// communicator's timeout) is reported by [`CommMatmul::async_error`], and later
    /// calls are refused with it (that call's `C` is then wrong).
    pub fn call<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&mut self, args: &mut [(&S, &S, &mut R)]) -> Result<()> {
        if let Some(e) = self.async_error() {
            return Err(e);
        }
        // Before any buffer's use is recorded on a stream (cudarc's event tracking).
        self.ring.check_call(args)?;
        let size = T::DTYPE.size() as u64;
        for ((rank, stream), (a, b, c)) in self.ranks.iter().zip(args.iter_mut()) {
            let ctx = stream.context();
            ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
            let lens = [a.len(), b.len(), c.len()];
            let (pa, _a) = a.device_ptr(stream);
            let (pb, _b) = b.device_ptr(stream);
            let (pc, _c) = c.device_ptr_mut(stream);
            for (what, at, len) in [("A", pa, lens[0]), ("B", pb, lens[1]), ("C", pc, lens[2])] {
                check_buffer(&format!("rank {rank}'s {what}"), (at, len as u64 * size), &buffer_info(at, ctx.cu_ctx(), &[])?, ctx.ordinal())?;
            }
        }
        self.ring.call(args)
    }

    /// The error that stopped the collective matmul, if one did: the communicator's
    /// (another process's rank's failure first; then the error a rank's loop stopped
    /// with, or [`Error::Aborted`] once the communicator was aborted), else the first error
    /// a wait of the ring reported ([`RingMatmul::async_error`]). Never blocks.
    pub fn async_error(&self) -> Option<Error> {
        self.failure.as_ref().and_then(failure_of).or_else(|| self.aborts.stopped()).or_else(|| self.ring.async_error())
    }
}

impl Drop for CommMatmul {
    /// Never blocks: the communicator stops aborting the heap; the ring (its own drop) and
    /// the heap go to the deferred frees, freed once the work queued on the ranks' streams
    /// has ended (every call ends on its rank's stream after its copy lanes).
    fn drop(&mut self) {
        self.aborts.unlink(&self.heap_abort);
        if let Some(heap) = self.heap.take() {
            let streams: Vec<Arc<CudaStream>> = self.ranks.iter().map(|(_, s)| s.clone()).collect();
            crate::work::free_after_streams(&streams, Box::new(heap));
        }
    }
}

/// A rank's collective matmul moves to the thread that drives the rank.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<CommMatmul>();
};

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ranks: &[(u32, bool)], nranks: u32, across: Option<u32>) -> String {
        match check_ranks(ranks, nranks, across) {
            Err(Error::InvalidArgument(why)) => why,
            other => panic!("{ranks:?} of {nranks}, across {across:?}: {other:?}"),
        }
    }

    #[test]
    fn a_matmul_takes_every_rank_of_one_process_or_its_one_rank_across_processes() {
        check_ranks(&[(0, true), (1, true), (2, true)], 3, None).unwrap();
        check_ranks(&[(0, true)], 1, None).unwrap();
        check_ranks(&[(5, true)], 8, Some(1)).unwrap();
        assert!(refused(&[(0, true), (1, true)], 3, None).contains("every rank"), "a rank missing");
        assert!(refused(&[(1, true), (0, true)], 2, None).contains("in order"), "out of order");
        assert!(refused(&[(0, true), (1, false)], 2, None).contains("of one communicator: false"), "another communicator's rank");
        assert!(refused(&[(0, true), (1, true)], 2, Some(1)).contains("each rank makes its own"), "two ranks across processes");
        assert!(refused(&[(3, true)], 4, Some(2)).contains("shares its device with 1 other"), "a rank sharing its device");
    }
}
