//! Whom a symmetric heap's collective calls speak for: the PEs of this process, and, in
//! the form with one PE per process, the bootstrap that reaches every other PE. Shared by
//! the GPU heap and the host-twin heap of the tests.

use crate::bootstrap::Bootstrap;
use crate::{Error, Result};

/// The PEs of this process and the way to the others.
#[derive(Debug)]
pub struct PeSet {
    /// The PEs of this process, in the order of a collective call's arguments.
    local: Vec<usize>,
    bootstrap: Option<Bootstrap>,
}

impl PeSet {
    /// All `n_pes` PEs in this process.
    pub fn all_here(n_pes: usize) -> Self {
        Self { local: (0..n_pes).collect(), bootstrap: None }
    }

    /// This process's one PE, the others reached through `bootstrap`.
    pub fn one_per_process(bootstrap: Bootstrap) -> Self {
        Self { local: vec![bootstrap.pe()], bootstrap: Some(bootstrap) }
    }

    /// The PEs of this process.
    pub fn local(&self) -> &[usize] {
        &self.local
    }

    /// The bootstrap to the other processes, in the one-PE-per-process form.
    pub fn bootstrap(&mut self) -> Option<&mut Bootstrap> {
        self.bootstrap.as_mut()
    }

    /// Every PE's argument of the collective call `call`, in PE order, from the local
    /// PEs' `args` (one each, in [`PeSet::local`]'s order). A wrong count of arguments is
    /// refused before any PE is asked.
    pub fn gather(&mut self, call: &str, args: &[u64]) -> Result<Vec<u64>> {
        if args.len() != self.local.len() {
            return Err(Error::InvalidArgument(format!("shmem {call}: {} arguments for {} PE(s) of this process", args.len(), self.local.len())));
        }
        let Some(bootstrap) = &mut self.bootstrap else { return Ok(args.to_vec()) };
        let bytes: Vec<u8> = args.iter().flat_map(|a| a.to_le_bytes()).collect();
        let parts = bootstrap.all_gather(call, &bytes, &[])?;
        let mut all = Vec::new();
        for part in parts {
            if part.bytes.len() % 8 != 0 {
                return Err(Error::Bootstrap(format!("a malformed argument of shmem {call}")));
            }
            all.extend(part.bytes.chunks_exact(8).map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]])));
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_pe_gets_every_argument_in_pe_order() {
        let path = std::env::temp_dir().join(format!("ferroccl-pes-{}.sock", std::process::id()));
        let all: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|pe| {
                    let path = &path;
                    s.spawn(move || {
                        let mut pes = PeSet::one_per_process(Bootstrap::join(pe, 3, path, Duration::from_secs(20)).unwrap());
                        assert_eq!(pes.local(), [pe]);
                        assert!(matches!(pes.gather("malloc", &[1, 2]), Err(Error::InvalidArgument(_))));
                        pes.gather("malloc", &[10 * pe as u64 + 1]).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(all.iter().all(|a| a == &[1, 11, 21]), "{all:?}");
        let mut here = PeSet::all_here(2);
        assert_eq!(here.gather("free", &[5, 6]).unwrap(), [5, 6]);
        assert!(here.bootstrap().is_none());
    }
}
