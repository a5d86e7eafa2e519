//! The PE launcher behind `ferroccl run -n N PROGRAM…`: starts N processes of PROGRAM,
//! PE `i` with `FERROCCL_PE=i`, `FERROCCL_N_PES=N`, `FERROCCL_DEVICE` (its device) and
//! `FERROCCL_BOOTSTRAP` (a fresh rendezvous socket path), which `host_shim::bootstrap`
//! reads. The PEs share the launcher's stdout and stderr.
//!
//! It never waits forever on a PE that has failed: once one exits unsuccessfully, the
//! others have `grace` to finish (a PE waiting on the failed one fails within its own
//! bootstrap budget) and are then killed. The outcome names every PE's exit.

use std::fmt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use host_shim::bootstrap::env::{DEVICE_VAR, MAX_SOCKET_PATH, N_PES_VAR, PE_VAR, RENDEZVOUS_VAR};

/// What to start.
#[derive(Clone, Debug)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// PE `i`'s device; its length is the PE count.
    pub devices: Vec<usize>,
    /// How long the other PEs may run on once one has failed.
    pub grace: Duration,
}

/// How one PE ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeExit {
    Status(ExitStatus),
    /// Killed by the launcher after another PE failed and the grace ran out.
    Killed,
}

/// Every PE's end, by PE.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub exits: Vec<PeExit>,
}

impl Outcome {
    /// Whether every PE exited successfully.
    pub fn success(&self) -> bool {
        self.exits.iter().all(|e| matches!(e, PeExit::Status(s) if s.success()))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed: Vec<String> = self
            .exits
            .iter()
            .enumerate()
            .filter_map(|(pe, e)| match e {
                PeExit::Status(s) if s.success() => None,
                PeExit::Status(s) => Some(format!("PE {pe} {s}")),
                PeExit::Killed => Some(format!("PE {pe} killed after another PE failed")),
            })
            .collect();
        match failed.is_empty() {
            true => write!(f, "all {} PEs exited successfully", self.exits.len()),
            false => f.write_str(&failed.join("; ")),
        }
    }
}

/// Starts every PE and waits for all of them (see the module doc). An error only where a
/// PE could not be started (the PEs already started are killed).
pub fn run(launch: &Launch) -> std::io::Result<Outcome> {
    if launch.devices.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no PE to start"));
    }
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("ferroccl-run-{}-{}", std::process::id(), RUNS.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let rendezvous = dir.join("bootstrap.sock");
    if rendezvous.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("the rendezvous path {} is too long for a socket", rendezvous.display())));
    }
    let n = launch.devices.len();
    let mut children: Vec<Child> = Vec::new();
    for (pe, device) in launch.devices.iter().enumerate() {
        let child = Command::new(&launch.program)
            .args(&launch.args)
            .env(PE_VAR, pe.to_string())
            .env(N_PES_VAR, n.to_string())
            .env(DEVICE_VAR, device.to_string())
            .env(RENDEZVOUS_VAR, &rendezvous)
            .spawn();
        match child {
            Ok(child) => children.push(child),
            Err(e) => {
                for mut started in children {
                    let _ = started.kill();
                    let _ = started.wait();
                }
                let _ = std::fs::remove_dir_all(&dir);
                return Err(std::io::Error::new(e.kind(), format!("starting PE {pe} ({}): {e}", launch.program.display())));
            }
        }
    }
    let outcome = wait_all(children, launch.grace);
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

/// Waits for every child; once one fails, the rest get `grace`, then are killed.
fn wait_all(mut children: Vec<Child>, grace: Duration) -> std::io::Result<Outcome> {
    let mut exits: Vec<Option<PeExit>> = children.iter().map(|_| None).collect();
    let mut kill_at: Option<Instant> = None;
    while exits.iter().any(Option::is_none) {
        for (child, exit) in children.iter_mut().zip(exits.iter_mut()).filter(|(_, e)| e.is_none()) {
            if let Some(status) = child.try_wait()? {
                if !status.success() && kill_at.is_none() {
                    kill_at = Some(Instant::now() + grace);
                }
                *exit = Some(PeExit::Status(status));
            }
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            for (child, exit) in children.iter_mut().zip(exits.iter_mut()).filter(|(_, e)| e.is_none()) {
                let _ = child.kill();
                let _ = child.wait();
                *exit = Some(PeExit::Killed);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(Outcome { exits: exits.into_iter().flatten().collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, pes: usize, grace: Duration) -> Outcome {
        let launch = Launch { program: "/bin/sh".into(), args: vec!["-c".into(), script.into()], devices: (10..10 + pes).collect(), grace };
        run(&launch).unwrap()
    }

    #[test]
    fn every_pe_gets_its_number_device_and_the_same_rendezvous() {
        let dir = std::env::temp_dir().join(format!("ferroccl-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = format!("echo \"$FERROCCL_PE $FERROCCL_N_PES $FERROCCL_DEVICE $FERROCCL_BOOTSTRAP\" > {}/pe$FERROCCL_PE", dir.display());
        let outcome = sh(&script, 3, Duration::from_secs(5));
        assert!(outcome.success(), "{outcome}");
        let lines: Vec<Vec<String>> = (0..3).map(|pe| std::fs::read_to_string(dir.join(format!("pe{pe}"))).unwrap().split_whitespace().map(str::to_owned).collect()).collect();
        for (pe, words) in lines.iter().enumerate() {
            assert_eq!(words[..3], [pe.to_string(), "3".into(), (10 + pe).to_string()]);
            assert_eq!(words[3], lines[0][3]);
            assert!(words[3].ends_with("bootstrap.sock"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_pe_is_named_and_one_that_hangs_is_killed_after_the_grace() {
        let start = Instant::now();
        let outcome = sh("if [ $FERROCCL_PE = 1 ]; then exit 3; fi; if [ $FERROCCL_PE = 2 ]; then exec sleep 60; fi", 3, Duration::from_millis(200));
        assert!(start.elapsed() < Duration::from_secs(30), "the sleeper was killed, not waited for");
        assert!(!outcome.success());
        assert!(matches!(&outcome.exits[0], PeExit::Status(s) if s.success()));
        assert!(matches!(&outcome.exits[1], PeExit::Status(s) if s.code() == Some(3)));
        assert_eq!(outcome.exits[2], PeExit::Killed);
        let text = outcome.to_string();
        assert!(text.contains("PE 1 exit status: 3") && text.contains("PE 2 killed"), "{text}");
    }

    #[test]
    fn a_program_that_cannot_start_is_an_error() {
        let launch = Launch { program: "/nonexistent/program".into(), args: vec![], devices: vec![0, 1], grace: Duration::from_secs(1) };
        let err = run(&launch).unwrap_err();
        assert!(err.to_string().contains("starting PE 0"), "{err}");
        assert!(run(&Launch { devices: vec![], ..launch }).is_err());
    }
}
