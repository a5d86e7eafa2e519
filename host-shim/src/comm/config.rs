//! What a user configures of a communicator ([`CommConfig`]: a few fields with documented
//! defaults), and the tunables below it, read from `FERROCCL_*` environment variables as
//! NCCL reads `NCCL_*` ones (docs/tuning.md lists them with their defaults).
//!
//! Where a value comes from, first match wins: a field the caller set on a [`CommConfig`];
//! else its environment variable, read by [`CommConfig::from_env`]; else the default.
//! The tunables that are not fields (the algorithm, FIFO step sizes, direct writes, the
//! resident channels, the burst gap, channel statistics) come from their environment variables or their
//! defaults only.

use std::time::Duration;

use device_rt::algo::AlgorithmChoice;

use super::tuning::Tuning;
use crate::{Error, Result};

/// [`CommConfig::timeout`]'s default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A communicator's configuration: what a user may need to choose. `#[non_exhaustive]`:
/// start from [`CommConfig::default`] or [`CommConfig::from_env`] and change fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommConfig {
    /// Channels of each rank at most (one CTA each while a call runs on it). Default 64;
    /// where a device cannot hold that many for each of its ranks, every rank gets the
    /// most every device holds. `FERROCCL_MAX_NCHANNELS`.
    pub max_channels: u32,
    /// Threads of each channel: a multiple of 32, 128 to 512. Default 256.
    /// `FERROCCL_NTHREADS`.
    pub threads: u32,
    /// How long any wait inside a call may take before the rank's loop stops with a
    /// timeout ([`Error::DeviceTimeout`]: the communicator is done, every later call fails
    /// with it; build a new one; a stream-ordered call's wait for the loop to run it is
    /// given a quarter more, so that the wait inside that ran out is the one named), and
    /// how long ranks across processes wait for each other
    /// at init. Default 10 minutes, as PyTorch's NCCL watchdog: a rank may be that late (a
    /// checkpoint, a slow data loader) without stopping the job. A rank that fails is found
    /// sooner: an abort, or another process's rank whose process ends, stops the
    /// communicator at once. `FERROCCL_TIMEOUT_MS`.
    pub timeout: Duration,
    /// Bytes of staging per rank for the one-shot and two-shot algorithms (twice this is
    /// allocated): the largest call they run. 0: every collective takes the ring. Default
    /// 48 MiB. `FERROCCL_STAGING_BYTES` (K, M, G suffixes).
    pub staging_bytes: u64,
    /// How long an idle rank's loop polls before it leaves the GPU, holding no SM until
    /// the next call; `None`: it stays until the communicator is dropped. Default 1 ms.
    /// `FERROCCL_IDLE_SLEEP_US` (`never`: `None`).
    pub idle_sleep: Option<Duration>,
}

impl Default for CommConfig {
    fn default() -> Self {
        let tuning = Tuning::default();
        Self {
            max_channels: tuning.loop_cfg.channels + tuning.loop_cfg.call_channels,
            threads: tuning.loop_cfg.threads,
            timeout: DEFAULT_TIMEOUT,
            staging_bytes: tuning.staging_bytes,
            idle_sleep: tuning.loop_cfg.sleep_after,
        }
    }
}

impl CommConfig {
    /// The defaults, each replaced by its environment variable where that is set. A value
    /// that does not parse is an [`Error::InvalidArgument`] naming the variable.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(&|name| std::env::var(name).ok())
    }

    fn from_lookup(env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let mut cfg = Self::default();
        read(env, "FERROCCL_MAX_NCHANNELS", parse_u32, &mut cfg.max_channels)?;
        read(env, "FERROCCL_NTHREADS", parse_u32, &mut cfg.threads)?;
        read(env, "FERROCCL_TIMEOUT_MS", parse_millis, &mut cfg.timeout)?;
        read(env, "FERROCCL_STAGING_BYTES", parse_bytes, &mut cfg.staging_bytes)?;
        read(env, "FERROCCL_IDLE_SLEEP_US", parse_idle_sleep, &mut cfg.idle_sleep)?;
        Ok(cfg)
    }

    /// The communicator's tunables: these fields over the defaults, then the tunables'
    /// environment variables.
    pub(crate) fn tuning(&self) -> Result<Tuning> {
        self.tuning_with(&|name| std::env::var(name).ok())
    }

    fn tuning_with(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Tuning> {
        if !self.threads.is_multiple_of(32) {
            return Err(Error::InvalidArgument(format!("{} threads a channel: a channel runs whole warps (a multiple of 32)", self.threads)));
        }
        let mut t = Tuning::default();
        let mut resident = t.loop_cfg.channels;
        read(env, "FERROCCL_RESIDENT_CHANNELS", parse_u32, &mut resident)?;
        if resident == 0 || resident > self.max_channels {
            return Err(Error::InvalidArgument(format!(
                "{resident} resident channels: a communicator needs 1 to its {} channels",
                self.max_channels
            )));
        }
        t.loop_cfg.channels = resident;
        t.loop_cfg.call_channels = self.max_channels - resident;
        t.loop_cfg.threads = self.threads;
        t.loop_cfg.spin_budget = self.timeout;
        t.loop_cfg.sleep_after = self.idle_sleep;
        t.staging_bytes = self.staging_bytes;
        read(env, "FERROCCL_ALGO", parse_algorithm, &mut t.algorithm)?;
        read(env, "FERROCCL_RING_STEP_BYTES", parse_bytes, &mut t.ring_step_bytes)?;
        read(env, "FERROCCL_P2P_STEP_BYTES", parse_bytes, &mut t.p2p_step_bytes)?;
        read(env, "FERROCCL_DIRECT", parse_switch, &mut t.direct)?;
        read(env, "FERROCCL_BURST_GAP_NS", parse_nanos, &mut t.loop_cfg.burst_gap)?;
        read(env, "FERROCCL_STATS", parse_switch, &mut t.stats)?;
        Ok(t)
    }
}

/// Replaces `*value` with variable `name`'s value, parsed, where it is set.
fn read<T>(env: &dyn Fn(&str) -> Option<String>, name: &str, parse: fn(&str) -> Result<T, String>, value: &mut T) -> Result<()> {
    let Some(text) = env(name) else { return Ok(()) };
    *value = parse(text.trim()).map_err(|why| Error::InvalidArgument(format!("{name}={text:?}: {why}")))?;
    Ok(())
}

/// A byte count, optionally followed by K, M or G (powers of 1024).
pub fn parse_bytes(value: &str) -> Result<u64, String> {
    let (digits, shift) = match value.char_indices().last() {
        Some((at, 'k' | 'K')) => (&value[..at], 10),
        Some((at, 'm' | 'M')) => (&value[..at], 20),
        Some((at, 'g' | 'G')) => (&value[..at], 30),
        _ => (value, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a number of bytes, optionally followed by K, M or G".into());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| "does not fit in 64 bits".into())
}

fn parse_u32(value: &str) -> Result<u32, String> {
    value.parse().map_err(|_| "expected a whole number below 2^32".into())
}

fn parse_millis(value: &str) -> Result<Duration, String> {
    value.parse().map(Duration::from_millis).map_err(|_| "expected milliseconds, a whole number".into())
}

fn parse_nanos(value: &str) -> Result<Duration, String> {
    value.parse().map(Duration::from_nanos).map_err(|_| "expected nanoseconds, a whole number".into())
}

fn parse_idle_sleep(value: &str) -> Result<Option<Duration>, String> {
    match value {
        "never" => Ok(None),
        us => us.parse().map(|us| Some(Duration::from_micros(us))).map_err(|_| "expected microseconds, a whole number, or never".into()),
    }
}

fn parse_switch(value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("expected 0 or 1".into()),
    }
}

fn parse_algorithm(value: &str) -> Result<AlgorithmChoice, String> {
    AlgorithmChoice::ALL.into_iter().find(|a| a.name() == value).ok_or_else(|| {
        let names: Vec<_> = AlgorithmChoice::ALL.iter().map(|a| a.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn without_variables_the_config_and_the_tuning_are_the_defaults() {
        let cfg = CommConfig::from_lookup(&env_of(&[])).unwrap();
        assert_eq!(cfg, CommConfig::default());
        let (t, d) = (cfg.tuning_with(&env_of(&[])).unwrap(), Tuning::default());
        assert_eq!((t.loop_cfg.channels, t.loop_cfg.call_channels, t.loop_cfg.threads), (d.loop_cfg.channels, d.loop_cfg.call_channels, d.loop_cfg.threads));
        assert_eq!((t.loop_cfg.spin_budget, t.loop_cfg.sleep_after, t.staging_bytes), (DEFAULT_TIMEOUT, d.loop_cfg.sleep_after, d.staging_bytes));
        assert_eq!((t.algorithm, t.ring_step_bytes, t.p2p_step_bytes, t.direct), (d.algorithm, d.ring_step_bytes, d.p2p_step_bytes, d.direct));
    }

    #[test]
    fn each_variable_replaces_its_default() {
        let env = env_of(&[
            ("FERROCCL_MAX_NCHANNELS", "16"),
            ("FERROCCL_NTHREADS", "512"),
            ("FERROCCL_TIMEOUT_MS", "2500"),
            ("FERROCCL_STAGING_BYTES", "8M"),
            ("FERROCCL_IDLE_SLEEP_US", "never"),
            ("FERROCCL_RESIDENT_CHANNELS", "4"),
            ("FERROCCL_ALGO", "two-shot"),
            ("FERROCCL_RING_STEP_BYTES", "1M"),
            ("FERROCCL_P2P_STEP_BYTES", "64K"),
            ("FERROCCL_DIRECT", "0"),
            ("FERROCCL_BURST_GAP_NS", "0"),
            ("FERROCCL_STATS", "1"),
        ]);
        let cfg = CommConfig::from_lookup(&env).unwrap();
        assert_eq!((cfg.max_channels, cfg.threads, cfg.timeout), (16, 512, Duration::from_millis(2500)));
        assert_eq!((cfg.staging_bytes, cfg.idle_sleep), (8 << 20, None));
        let t = cfg.tuning_with(&env).unwrap();
        assert_eq!((t.loop_cfg.channels, t.loop_cfg.call_channels, t.loop_cfg.threads), (4, 12, 512));
        assert_eq!((t.algorithm, t.ring_step_bytes, t.p2p_step_bytes, t.direct), (AlgorithmChoice::TwoShot, 1 << 20, 64 << 10, false));
        assert_eq!((t.loop_cfg.burst_gap, t.loop_cfg.sleep_after, t.staging_bytes, t.stats), (Duration::ZERO, None, 8 << 20, true));
    }

    #[test]
    fn a_field_the_caller_set_wins_over_its_variable() {
        let env = env_of(&[("FERROCCL_NTHREADS", "512")]);
        let cfg = CommConfig { threads: 128, ..CommConfig::default() };
        assert_eq!(cfg.tuning_with(&env).unwrap().loop_cfg.threads, 128);
    }

    #[test]
    fn a_value_that_does_not_parse_names_its_variable() {
        for (vars, name) in [
            (&[("FERROCCL_NTHREADS", "many")][..], "FERROCCL_NTHREADS"),
            (&[("FERROCCL_STAGING_BYTES", "12X")][..], "FERROCCL_STAGING_BYTES"),
            (&[("FERROCCL_STAGING_BYTES", "99999999999G")][..], "FERROCCL_STAGING_BYTES"),
            (&[("FERROCCL_IDLE_SLEEP_US", "-1")][..], "FERROCCL_IDLE_SLEEP_US"),
        ] {
            let err = CommConfig::from_lookup(&env_of(vars)).unwrap_err();
            assert!(matches!(&err, Error::InvalidArgument(m) if m.starts_with(name)), "{err}");
        }
        for (vars, name) in [
            (&[("FERROCCL_ALGO", "fastest")][..], "FERROCCL_ALGO"),
            (&[("FERROCCL_DIRECT", "yes")][..], "FERROCCL_DIRECT"),
            (&[("FERROCCL_RING_STEP_BYTES", "")][..], "FERROCCL_RING_STEP_BYTES"),
        ] {
            let err = CommConfig::default().tuning_with(&env_of(vars)).unwrap_err();
            assert!(matches!(&err, Error::InvalidArgument(m) if m.starts_with(name)), "{err}");
        }
    }

    #[test]
    fn threads_come_in_whole_warps() {
        let cfg = CommConfig { threads: 200, ..CommConfig::default() };
        assert!(matches!(cfg.tuning_with(&env_of(&[])), Err(Error::InvalidArgument(m)) if m.contains("multiple of 32")));
    }

    #[test]
    fn resident_channels_must_be_among_the_channels() {
        let cfg = CommConfig { max_channels: 8, ..CommConfig::default() };
        for resident in ["0", "9"] {
            let vars = [("FERROCCL_RESIDENT_CHANNELS", resident)];
            assert!(matches!(cfg.tuning_with(&env_of(&vars)), Err(Error::InvalidArgument(_))), "{resident}");
        }
    }
}
