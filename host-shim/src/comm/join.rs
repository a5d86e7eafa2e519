//! How the ranks of a communicator across processes agree before any memory is shared:
//! they meet at the id's rendezvous ([`meet`]), each says what it is ([`Intro`]: its
//! process, its device, how many channels its device holds at once, its configuration),
//! and every rank derives the same answer from the same introductions ([`agree`]): the
//! call channels every device holds, the ranks that share each device, or one error that
//! every rank returns. Then each rank's connection block travels to every rank as a file
//! descriptor ([`exchange_blocks`]). Pure host code: the GPU communicator
//! ([`Comm::init_rank`](super::Comm::init_rank)) and the host twin's ranks in processes
//! run it alike.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use super::id::CommId;
use crate::bootstrap::Bootstrap;
use crate::{Error, Result};

/// What one rank tells the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intro {
    /// Its process (the process id; ranks of one process may share a device).
    pub process: u64,
    /// Its device's UUID.
    pub device: [u8; 16],
    /// Channels its device holds at once (resident, call kernels' and call channels').
    pub room: u32,
    /// The granularity its device maps shared memory in.
    pub granularity: u64,
    /// Call channels it was configured with (a most).
    pub call_channels: u32,
    /// The rest of its configuration, as text: every rank's must be the same.
    pub config: String,
}

impl Intro {
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.process.to_le_bytes().to_vec();
        out.extend_from_slice(&self.device);
        out.extend_from_slice(&self.room.to_le_bytes());
        out.extend_from_slice(&self.granularity.to_le_bytes());
        out.extend_from_slice(&self.call_channels.to_le_bytes());
        out.extend_from_slice(self.config.as_bytes());
        out
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let word = |at: usize| bytes.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let half = |at: usize| bytes.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
        Some(Self {
            process: word(0)?,
            device: bytes.get(8..24)?.try_into().ok()?,
            room: half(24)?,
            granularity: word(28)?,
            call_channels: half(36)?,
            config: String::from_utf8(bytes.get(40..)?.to_vec()).ok()?,
        })
    }
}

/// What every rank derived from the introductions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// Call channels of every rank: the configured ones where every device holds them.
    pub call_channels: u32,
    /// For each rank, the ranks of its process on its device (itself included).
    pub ranks_on_device: Vec<u32>,
    /// The granularity every rank's block is a multiple of.
    pub granularity: u64,
}

/// Bootstrap errors name PEs; a communicator's PEs are its ranks.
fn in_ranks(e: Error) -> Error {
    match e {
        Error::Bootstrap(why) => Error::Bootstrap(why.replace("PE", "rank")),
        other => other,
    }
}

/// Meets the other `nranks - 1` ranks at `id`'s rendezvous as rank `rank`, within
/// `budget`, and gathers every rank's introduction: the bootstrap (for the exchanges that
/// follow) and the introductions in rank order. A rank that never arrives fails every
/// rank's meeting within the budget, naming it.
pub fn meet(id: &CommId, nranks: usize, rank: usize, budget: Duration, intro: &Intro) -> Result<(Bootstrap, Vec<Intro>)> {
    if nranks == 0 || rank >= nranks {
        return Err(Error::InvalidArgument(format!("rank {rank} of a communicator of {nranks} ranks")));
    }
    let mut bootstrap = Bootstrap::join_at(rank, nranks, &id.rendezvous(), budget).map_err(in_ranks)?;
    let parts = bootstrap.all_gather("communicator introductions", &intro.to_bytes(), &[]).map_err(in_ranks)?;
    let intros = parts
        .iter()
        .enumerate()
        .map(|(r, part)| Intro::from_bytes(&part.bytes).ok_or_else(|| Error::Bootstrap(format!("rank {r} sent a malformed introduction"))))
        .collect::<Result<Vec<_>>>()?;
    Ok((bootstrap, intros))
}

/// What every rank derives from `intros`, each with `resident` resident channels: the
/// same on every rank, so every rank returns the same error where there is one.
///
/// Refused: ranks configured differently ([`Error::InvalidArgument`], naming the first
/// rank that differs from rank 0, and both configurations); ranks of different processes
/// on one device ([`Error::DeviceLimit`]: two processes' persistent loops on one GPU
/// time-slice, and a loop that waits for one that is not running waits out its budget).
pub fn agree(intros: &[Intro], resident: u32) -> Result<Agreement> {
    let Some(first) = intros.first() else { return Err(Error::InvalidArgument("a communicator of no ranks".into())) };
    if let Some((r, other)) = intros.iter().enumerate().find(|(_, i)| i.config != first.config || i.call_channels != first.call_channels) {
        return Err(Error::InvalidArgument(format!(
            "rank {r} was configured otherwise than rank 0: {} with {} call channels, rank 0 {} with {}",
            other.config, other.call_channels, first.config, first.call_channels
        )));
    }
    for (a, ia) in intros.iter().enumerate() {
        if let Some(b) = intros.iter().skip(a + 1).position(|ib| ib.device == ia.device && ib.process != ia.process) {
            return Err(Error::DeviceLimit(format!(
                "ranks {a} and {} are on one GPU in two processes: their persistent loops would time-slice the GPU and wait for each other; give each process its own GPUs",
                a + 1 + b
            )));
        }
    }
    let ranks_on_device: Vec<u32> = intros.iter().map(|i| intros.iter().filter(|j| j.device == i.device && j.process == i.process).count() as u32).collect();
    let call_channels = intros.iter().zip(&ranks_on_device).map(|(i, &here)| super::call_channels_that_fit(i.room, here, resident)).fold(first.call_channels, u32::min);
    let granularity = intros.iter().map(|i| i.granularity).max().unwrap_or(1).max(1);
    Ok(Agreement { call_channels, ranks_on_device, granularity })
}

/// Hands `fd` (this rank's exported connection block) to every rank through the
/// bootstrap and returns every rank's, in rank order (this rank's own as a copy).
pub fn exchange_blocks(bootstrap: &mut Bootstrap, fd: BorrowedFd<'_>) -> Result<Vec<OwnedFd>> {
    let parts = bootstrap.all_gather("communicator blocks", &[], &[fd]).map_err(in_ranks)?;
    parts
        .into_iter()
        .enumerate()
        .map(|(r, part)| part.fds.into_iter().next().ok_or_else(|| Error::Bootstrap(format!("rank {r} sent no connection block"))))
        .collect()
}

/// A rank's place in a communicator a split made: the new communicator's id, its ranks,
/// and this rank among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitPlace {
    pub id: CommId,
    pub nranks: usize,
    pub rank: usize,
}

/// The color of a rank that takes part in a split without joining any of its
/// communicators (NCCL's `NCCL_SPLIT_NOCOLOR`).
pub const NO_COLOR: i32 = -1;

/// Meets the other `nranks - 1` ranks of the communicator that met at `id` again, as rank
/// `rank`, at an id derived from `id` and `what` (every rank names the meeting alike: a
/// split or a collective matmul, with its count), within `budget`: the bootstrap of the
/// meeting. A rank that never arrives fails every rank's meeting, naming it.
pub fn meet_again(id: &CommId, what: &str, nranks: usize, rank: usize, budget: Duration) -> Result<Bootstrap> {
    Bootstrap::join_at(rank, nranks, &id.derive(what.as_bytes()).rendezvous(), budget).map_err(in_ranks)
}

/// The `nth` split of the communicator of `nranks` ranks that met at `id` (NCCL's
/// `ncclCommSplit`): every rank calls it at once with its `color` and `key`; the ranks
/// meet again (at an id derived from `id` and `nth`, within `budget`) and trade both.
/// Returns this rank's place: the ranks of its color, ordered by key, then by their rank
/// here, at an id derived from `id`, `nth` and the color; `None` for [`NO_COLOR`]. A
/// negative color other than [`NO_COLOR`] fails every rank's split.
pub fn split(id: &CommId, nth: u64, nranks: usize, rank: usize, color: i32, key: i32, budget: Duration) -> Result<Option<SplitPlace>> {
    let mut bootstrap = meet_again(id, &format!("split {nth}"), nranks, rank, budget)?;
    let mine: Vec<u8> = [color, key].iter().flat_map(|v| v.to_le_bytes()).collect();
    let parts = bootstrap.all_gather("split", &mine, &[]).map_err(in_ranks)?;
    let mut all = Vec::new();
    for (r, part) in parts.iter().enumerate() {
        let [c0, c1, c2, c3, k0, k1, k2, k3] = part.bytes[..] else { return Err(Error::Bootstrap(format!("rank {r} sent a malformed split"))) };
        all.push((i32::from_le_bytes([c0, c1, c2, c3]), i32::from_le_bytes([k0, k1, k2, k3])));
    }
    if let Some((r, (c, _))) = all.iter().enumerate().find(|(_, (c, _))| *c < 0 && *c != NO_COLOR) {
        return Err(Error::InvalidArgument(format!("rank {r} split with color {c}: a color is at least 0, or NO_COLOR ({NO_COLOR})")));
    }
    if color == NO_COLOR {
        return Ok(None);
    }
    let mut members: Vec<(i32, usize)> = all.iter().enumerate().filter(|(_, (c, _))| *c == color).map(|(r, (_, k))| (*k, r)).collect();
    members.sort_unstable();
    let place = members.iter().position(|&(_, r)| r == rank).unwrap_or(0);
    Ok(Some(SplitPlace { id: id.derive(format!("split {nth} color {color}").as_bytes()), nranks: members.len(), rank: place }))
}

/// Waits until every rank has called `ready` with the same `what`: every rank's block is
/// written before any loop starts (a peer's first FIFO write must land on a written
/// block).
pub fn ready(bootstrap: &mut Bootstrap, what: &str) -> Result<()> {
    bootstrap.all_gather(what, &[], &[]).map(drop).map_err(in_ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intro(process: u64, device: u8) -> Intro {
        Intro { process, device: [device; 16], room: 132, granularity: 2 << 20, call_channels: 63, config: "1 resident channel of 256 threads".into() }
    }

    #[test]
    fn an_introduction_survives_its_bytes() {
        let i = Intro { room: 264, granularity: 4096, ..intro(77, 3) };
        assert_eq!(Intro::from_bytes(&i.to_bytes()), Some(i));
        assert_eq!(Intro::from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn ranks_of_one_process_share_a_device_and_fit_its_call_channels() {
        let intros = [intro(1, 0), intro(1, 0), intro(2, 1)];
        let agreed = agree(&intros, 1).unwrap();
        assert_eq!(agreed.ranks_on_device, [2, 2, 1]);
        // Two ranks on 132 channels' room: 66 each, less a submitter and a resident
        // channel, hold the 63 configured.
        assert_eq!(agreed.call_channels, 63);
        let crowded = [intro(1, 0), intro(1, 0), intro(1, 0), intro(2, 1)];
        // Three ranks: 44 each, 42 call channels.
        assert_eq!(agree(&crowded, 1).unwrap().call_channels, 42);
        let small = [Intro { room: 40, ..intro(1, 0) }, intro(2, 1)];
        assert_eq!(agree(&small, 1).unwrap().call_channels, 38);
    }

    #[test]
    fn ranks_of_two_processes_on_one_device_are_refused() {
        let e = agree(&[intro(1, 0), intro(2, 1), intro(3, 0)], 1).unwrap_err();
        assert!(matches!(&e, Error::DeviceLimit(why) if why.contains("ranks 0 and 2")), "{e}");
    }

    #[test]
    fn ranks_configured_otherwise_are_refused_naming_the_first() {
        let other = Intro { config: "1 resident channel of 512 threads".into(), ..intro(3, 2) };
        let e = agree(&[intro(1, 0), intro(2, 1), other], 1).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(why) if why.contains("rank 2") && why.contains("512")), "{e}");
    }

    #[test]
    fn a_rank_that_never_arrives_is_named_by_every_other() {
        let id = CommId::new().unwrap();
        let budget = Duration::from_millis(300);
        let errors: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2).map(|r| s.spawn(move || meet(&id, 3, r, budget, &intro(r as u64, r as u8)).unwrap_err().to_string())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(errors.iter().all(|e| e.contains("rank(s) 2 of 3 never reached")), "{errors:?}");
    }

    #[test]
    fn a_split_orders_each_color_by_key_then_rank() {
        let id = CommId::new().unwrap();
        // Ranks 0..5: colors 0, 1, 0, NO_COLOR, 1; keys put rank 2 before rank 0.
        let (colors, keys) = ([0, 1, 0, NO_COLOR, 1], [5, 0, 1, 0, 0]);
        let places: Vec<Option<SplitPlace>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..5).map(|r| s.spawn(move || split(&id, 1, 5, r, colors[r], keys[r], Duration::from_secs(20)).unwrap())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let of = |r: usize| places[r].map(|p| (p.nranks, p.rank));
        assert_eq!([of(0), of(1), of(2), of(3), of(4)], [Some((2, 1)), Some((2, 0)), Some((2, 0)), None, Some((2, 1))]);
        assert_eq!(places[0].unwrap().id, places[2].unwrap().id);
        assert_eq!(places[1].unwrap().id, places[4].unwrap().id);
        assert_ne!(places[0].unwrap().id, places[1].unwrap().id);
    }

    #[test]
    fn a_negative_color_fails_every_ranks_split() {
        let id = CommId::new().unwrap();
        let errors: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2).map(|r| s.spawn(move || split(&id, 1, 2, r, if r == 1 { -5 } else { 0 }, 0, Duration::from_secs(20)).unwrap_err().to_string())).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(errors.iter().all(|e| e.contains("rank 1 split with color -5")), "{errors:?}");
    }

    #[test]
    fn ranks_meet_and_trade_blocks_in_rank_order() {
        let id = CommId::from_bytes(CommId::new().unwrap().as_bytes()).unwrap();
        let dir = std::env::temp_dir().join(format!("ferroccl-join-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seen: Vec<Vec<String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|r| {
                    let dir = &dir;
                    s.spawn(move || {
                        let (mut bootstrap, intros) = meet(&id, 3, r, Duration::from_secs(20), &intro(r as u64, r as u8)).unwrap();
                        assert_eq!(intros.iter().map(|i| i.process).collect::<Vec<_>>(), [0, 1, 2]);
                        let path = dir.join(format!("block{r}"));
                        std::fs::write(&path, format!("block of rank {r}")).unwrap();
                        let file = std::fs::File::open(&path).unwrap();
                        let fds = exchange_blocks(&mut bootstrap, std::os::fd::AsFd::as_fd(&file)).unwrap();
                        ready(&mut bootstrap, "blocks written").unwrap();
                        // The descriptors share one file offset: read at 0.
                        let read = |fd: OwnedFd| {
                            let mut buf = [0u8; 64];
                            let n = std::os::unix::fs::FileExt::read_at(&std::fs::File::from(fd), &mut buf, 0).unwrap();
                            String::from_utf8(buf[..n].to_vec()).unwrap()
                        };
                        fds.into_iter().map(read).collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let _ = std::fs::remove_dir_all(&dir);
        for ranks_view in &seen {
            assert_eq!(ranks_view, &["block of rank 0", "block of rank 1", "block of rank 2"]);
        }
    }
}
