//! Which PE this process is, read from its environment: what `ferroccl run` sets, or
//! what another launcher (Open MPI, an MPI with PMI, Slurm, torchrun) sets.

use std::path::PathBuf;

use crate::{Error, Result};

/// `ferroccl run`'s variables: this process's PE number, the PE count, the device it
/// should use, and the rendezvous socket's path.
pub const PE_VAR: &str = "FERROCCL_PE";
pub const N_PES_VAR: &str = "FERROCCL_N_PES";
pub const DEVICE_VAR: &str = "FERROCCL_DEVICE";
pub const RENDEZVOUS_VAR: &str = "FERROCCL_BOOTSTRAP";

/// Rank and size variables of other launchers, in the order they are looked at.
const LAUNCHERS: [(&str, &str); 5] = [
    (PE_VAR, N_PES_VAR),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
    ("RANK", "WORLD_SIZE"),
];

/// Node-local rank variables, for the device when [`DEVICE_VAR`] is not set.
const LOCAL_RANKS: [&str; 3] = ["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"];

/// Job identifiers a rendezvous path is made from when [`RENDEZVOUS_VAR`] is not set.
const JOB_IDS: [&str; 3] = ["SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "MASTER_PORT"];

/// The longest socket path Linux takes (`sun_path` less its terminating zero).
pub const MAX_SOCKET_PATH: usize = 107;

/// This process's place among the PEs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeEnv {
    pub pe: usize,
    pub n_pes: usize,
    /// The device ordinal to use: [`DEVICE_VAR`], else the node-local rank, else the PE.
    pub device: usize,
    /// PE 0 listens here; every other PE connects.
    pub rendezvous: PathBuf,
}

impl PeEnv {
    /// Reads the process environment: `Ok(None)` where no launcher set a rank.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The same over any variable lookup.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let Some((rank_var, size_var)) = LAUNCHERS.into_iter().find(|(rank, _)| get(rank).is_some()) else {
            return Ok(None);
        };
        let number = |var: &str| -> Result<usize> {
            let text = get(var).ok_or_else(|| Error::InvalidArgument(format!("{rank_var} is set but {var} is not")))?;
            text.trim().parse().map_err(|_| Error::InvalidArgument(format!("{var}={text:?} is not a number")))
        };
        let (pe, n_pes) = (number(rank_var)?, number(size_var)?);
        if pe >= n_pes {
            return Err(Error::InvalidArgument(format!("{rank_var}={pe} is not below {size_var}={n_pes}")));
        }
        let device = match [DEVICE_VAR].into_iter().chain(LOCAL_RANKS).find(|var| get(var).is_some()) {
            Some(var) => number(var)?,
            None => pe,
        };
        let rendezvous = match get(RENDEZVOUS_VAR) {
            Some(path) => PathBuf::from(path),
            None => {
                let job = JOB_IDS.into_iter().find_map(|var| get(var).map(|id| (var, id)));
                let (var, id) = job.ok_or_else(|| {
                    Error::InvalidArgument(format!("{rank_var} is set but neither {RENDEZVOUS_VAR} nor a job id ({}) names the PEs' rendezvous", JOB_IDS.join(", ")))
                })?;
                let id: String = id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
                let dir = get("TMPDIR").unwrap_or_else(|| "/tmp".into());
                PathBuf::from(format!("{dir}/ferroccl-{}-{id}.sock", var.to_ascii_lowercase()))
            }
        };
        if rendezvous.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::InvalidArgument(format!("the rendezvous path {} is longer than a socket path may be ({MAX_SOCKET_PATH} bytes)", rendezvous.display())));
        }
        Ok(Some(Self { pe, n_pes, device, rendezvous }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<PeEnv>> {
        PeEnv::from_lookup(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn ferroccl_run_sets_everything() {
        let env = read(&[(PE_VAR, "2"), (N_PES_VAR, "4"), (DEVICE_VAR, "3"), (RENDEZVOUS_VAR, "/tmp/x.sock")]).unwrap().unwrap();
        assert_eq!(env, PeEnv { pe: 2, n_pes: 4, device: 3, rendezvous: "/tmp/x.sock".into() });
    }

    #[test]
    fn other_launchers_give_rank_size_device_and_job() {
        let env = read(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2"), ("OMPI_COMM_WORLD_LOCAL_RANK", "1"), ("SLURM_JOB_ID", "77")]).unwrap().unwrap();
        assert_eq!(env, PeEnv { pe: 1, n_pes: 2, device: 1, rendezvous: "/tmp/ferroccl-slurm_job_id-77.sock".into() });
        let env = read(&[("RANK", "3"), ("WORLD_SIZE", "8"), ("MASTER_PORT", "29500"), ("TMPDIR", "/scratch")]).unwrap().unwrap();
        assert_eq!((env.pe, env.n_pes, env.device), (3, 8, 3));
        assert_eq!(env.rendezvous, PathBuf::from("/scratch/ferroccl-master_port-29500.sock"));
    }

    #[test]
    fn no_launcher_is_no_pe_and_half_a_setting_is_an_error() {
        assert_eq!(read(&[("HOME", "/root")]).unwrap(), None);
        for vars in [
            &[(PE_VAR, "0"), (RENDEZVOUS_VAR, "/tmp/x")][..],
            &[(PE_VAR, "x"), (N_PES_VAR, "2"), (RENDEZVOUS_VAR, "/tmp/x")],
            &[(PE_VAR, "2"), (N_PES_VAR, "2"), (RENDEZVOUS_VAR, "/tmp/x")],
            &[(PE_VAR, "0"), (N_PES_VAR, "2")],
            &[(PE_VAR, "0"), (N_PES_VAR, "2"), (DEVICE_VAR, "gpu0"), (RENDEZVOUS_VAR, "/tmp/x")],
        ] {
            assert!(matches!(read(vars), Err(Error::InvalidArgument(_))), "{vars:?}");
        }
        let long = format!("/tmp/{}", "d".repeat(120));
        assert!(matches!(read(&[(PE_VAR, "0"), (N_PES_VAR, "1"), (RENDEZVOUS_VAR, &long)]), Err(Error::InvalidArgument(_))));
    }
}
