//! `ncclGroupStart` / `ncclGroupEnd`: per thread, as NCCL's. Inside a group, inits and
//! point-to-point calls wait for the group's end; collectives run at once (each is
//! stream-ordered and returns without waiting for the other ranks, so several ranks of one
//! thread may call them in turn). At the end, the inits run together (one thread each:
//! every init waits for its peers) and each rank's sends and receives run as items of one
//! send and one receive each, in an order that cannot deadlock (`rounds`).

use std::cell::RefCell;

use host_shim::cudarc::driver::sys;

use crate::calls::{self, Side};
use crate::comm::{InitArgs, NcclComm};
use crate::error::Failure;
use crate::memory::StagedCopy;
use crate::rounds;
use crate::types::moved_type;

/// A point-to-point call waiting for its group's end.
#[derive(Clone, Copy)]
struct Transfer {
    comm: *mut NcclComm,
    stream: sys::CUstream,
    side: Side,
    send: bool,
}

/// An init waiting for its group's end, and where its rank goes.
struct Init {
    out: *mut *mut NcclComm,
    args: InitArgs,
}

#[derive(Default)]
struct Group {
    depth: u32,
    inits: Vec<Init>,
    transfers: Vec<Transfer>,
    /// Copies the transfers read, freed once they are enqueued.
    staged: Vec<StagedCopy>,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

/// `ncclGroupStart`.
pub fn start() {
    GROUP.with(|g| g.borrow_mut().depth += 1);
}

/// Whether this thread is inside a group.
fn open() -> bool {
    GROUP.with(|g| g.borrow().depth > 0)
}

/// `ncclCommInitRank` and its kin: at once outside a group, at its end inside one.
///
/// # Safety
/// `out` is a writable `ncclComm_t` that lives until the group ends.
pub unsafe fn init(out: *mut *mut NcclComm, args: InitArgs) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::argument("comm is NULL"));
    }
    // The device is the one current now (a caller sets it before each init of a group).
    let args = args.on_current_device()?;
    if open() {
        GROUP.with(|g| g.borrow_mut().inits.push(Init { out, args }));
        return Ok(());
    }
    let comm = args.init()?;
    // SAFETY: `out` is writable (this function's contract).
    unsafe { *out = Box::into_raw(comm) };
    Ok(())
}

/// Point-to-point calls of rank `comm` (`true`: a send): `ncclSend` / `ncclRecv` one each,
/// the exchanges (`ncclGather`, …) all of theirs, with the copy they read from, if any
/// (freed on its stream once they are enqueued). Queued together inside a group; outside
/// one, a group of their own.
///
/// # Safety
/// As [`calls::send_recv`]'s; inside a group, until its end.
pub unsafe fn transfers(comm: *mut NcclComm, stream: sys::CUstream, calls: &[(Side, bool)], staged: Option<StagedCopy>) -> Result<(), Failure> {
    // SAFETY: this function's contract.
    unsafe { NcclComm::from_ptr(comm) }?;
    let transfers: Vec<Transfer> = calls.iter().map(|&(side, send)| Transfer { comm, stream, side, send }).collect();
    if open() {
        GROUP.with(|g| {
            let mut g = g.borrow_mut();
            g.transfers.extend(transfers);
            g.staged.extend(staged);
        });
        return Ok(());
    }
    // SAFETY: this function's contract.
    unsafe { run_transfers(&transfers) }
}

/// `ncclGroupEnd`: the group's inits and transfers run when the outermost group ends.
///
/// # Safety
/// Every pointer the group's calls were given is still valid.
pub unsafe fn end() -> Result<(), Failure> {
    // `_staged` is dropped (its frees enqueued) after the transfers, on every return.
    let (inits, transfers, _staged) = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        match g.depth {
            0 => Err(Failure::usage("ncclGroupEnd without ncclGroupStart")),
            1 => {
                g.depth = 0;
                Ok((std::mem::take(&mut g.inits), std::mem::take(&mut g.transfers), std::mem::take(&mut g.staged)))
            }
            _ => {
                g.depth -= 1;
                Ok((Vec::new(), Vec::new(), Vec::new()))
            }
        }
    })?;
    let built: Vec<Result<Box<NcclComm>, Failure>> = std::thread::scope(|s| {
        let handles: Vec<_> = inits.iter().map(|init| init.args).map(|args| s.spawn(move || args.init())).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Failure::usage("an init panicked")))).collect()
    });
    let mut first = Ok(());
    for (init, comm) in inits.iter().zip(built) {
        match comm {
            // SAFETY: `out` is writable until the group's end (`init`'s contract).
            Ok(comm) => unsafe { *init.out = Box::into_raw(comm) },
            Err(e) => first = first.and(Err(e)),
        }
    }
    first?;
    // SAFETY: this function's contract.
    unsafe { run_transfers(&transfers) }
}

/// Runs a group's transfers: each rank's sends and receives as a sequence of items of one
/// send and one receive each, in the order [`rounds`] gives (by distance round the ring:
/// no group deadlocks, whatever order its calls came in). A rank's transfers on different
/// streams, a peer outside the ranks or an unknown type are refused before any runs.
///
/// # Safety
/// As [`calls::send_recv`]'s, for every transfer.
unsafe fn run_transfers(transfers: &[Transfer]) -> Result<(), Failure> {
    let mut ranks: Vec<*mut NcclComm> = transfers.iter().map(|t| t.comm).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut plans = Vec::new();
    for comm in ranks {
        let mine: Vec<&Transfer> = transfers.iter().filter(|t| t.comm == comm).collect();
        if mine.windows(2).any(|w| w[0].stream != w[1].stream) {
            return Err(Failure::usage("a group's sends and receives on one communicator are on different streams"));
        }
        for t in &mine {
            moved_type(t.side.dtype)?;
        }
        let (rank, nranks) = {
            // SAFETY: a live rank (checked when the transfer was queued; this function's
            // contract keeps it live).
            let held = unsafe { NcclComm::from_ptr(comm) }?.lock();
            let c = held.comm()?;
            (c.rank(), c.world_size())
        };
        let calls: Vec<rounds::Call> = mine
            .iter()
            .map(|t| usize::try_from(t.side.peer).map(|peer| rounds::Call { peer, send: t.send }).map_err(|_| Failure::argument(format!("peer {} of {nranks} ranks", t.side.peer))))
            .collect::<Result<_, _>>()?;
        let items = rounds::rounds(rank, nranks, &calls).map_err(Failure::argument)?;
        plans.push((comm, mine[0].stream, items.into_iter().map(|(s, r)| (s.map(|i| mine[i].side), r.map(|i| mine[i].side))).collect::<Vec<_>>()));
    }
    for (comm, stream, items) in plans {
        for (send, recv) in items {
            // SAFETY: this function's contract.
            unsafe { calls::send_recv(comm, stream, send, recv) }?;
        }
    }
    Ok(())
}
