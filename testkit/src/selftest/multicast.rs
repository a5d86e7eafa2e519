//! NVLink multicast's host code on a GPU, short of creating an object (never on shared
//! machines, docs/nvls.md): the team check against what the device reports, the driver's
//! granularity for a team of two, and hardware NVLS's plan of a team.

use host_shim::Error;
use host_shim::multicast::{check_team, granularity};
use host_shim::nvls_hw::{NvlsTeamConfig, TeamPlan};

use super::{Fixture, Outcome, ensure};

pub(super) fn multicast_granularity(fx: &Fixture) -> Outcome {
    let ordinal = fx.ctx.ordinal();
    let devices = host_shim::device::list()?;
    let supported = devices.iter().find(|d| d.ordinal == ordinal).is_some_and(|d| d.multicast_supported);
    let refused = check_team(&[(ordinal, supported), (ordinal + 1, false)], 1 << 21);
    ensure(matches!(refused, Err(Error::MulticastUnsupported { .. })), || format!("a team with a device without multicast: {refused:?}"))?;
    if !supported {
        let alone = check_team(&[(ordinal, false), (ordinal + 1, true)], 1 << 21);
        return ensure(matches!(alone, Err(Error::MulticastUnsupported { ordinal: o }) if o == ordinal), || {
            format!("device {ordinal} reports no multicast, yet the team check said {alone:?}")
        });
    }
    let g = granularity(&fx.ctx, 2, 1 << 21)?;
    ensure(g.minimum > 0 && g.minimum.is_power_of_two() && g.recommended >= g.minimum, || format!("multicast granularity {g:?}"))?;
    ensure(g.round_up(1) >= g.minimum && g.round_up(1).is_multiple_of(g.minimum), || format!("1 byte rounds to {} with {g:?}", g.round_up(1)))
}

/// Hardware NVLS up to its multicast object: a bad team configuration and a team that
/// names one device twice are refused; with a second device, the plan over both (module
/// and kernel loaded on each, the team's threads and shared memory checked, multicast
/// support asked) passes where both report multicast and is refused where one does not.
/// Creates no multicast object.
pub(super) fn hardware_nvls_plan(fx: &Fixture) -> Outcome {
    let cfg = NvlsTeamConfig::default();
    let bad = TeamPlan::new(&[fx.ctx.clone(), fx.ctx.clone()], NvlsTeamConfig { threads: 64, ..cfg });
    ensure(matches!(bad, Err(Error::InvalidArgument(_))), || format!("64 threads a channel: {:?}", bad.as_ref().err()))?;
    let twice = TeamPlan::new(&[fx.ctx.clone(), fx.ctx.clone()], cfg);
    ensure(matches!(twice, Err(Error::InvalidArgument(_))), || format!("one device twice: {:?}", twice.as_ref().err()))?;
    let devices = host_shim::device::list()?;
    let Some(other) = devices.iter().find(|d| d.ordinal != fx.ctx.ordinal()) else {
        return Ok(());
    };
    let mine = devices.iter().any(|d| d.ordinal == fx.ctx.ordinal() && d.multicast_supported);
    let supported = mine && other.multicast_supported;
    let other_ctx = cudarc::driver::CudaContext::new(other.ordinal).map_err(Error::cuda("cuCtxCreate"))?;
    match TeamPlan::new(&[fx.ctx.clone(), other_ctx], cfg) {
        Ok(plan) => ensure(supported && plan.share_bytes() > 0, || format!("a plan of {} bytes a rank where multicast support is {supported}", plan.share_bytes())),
        Err(Error::MulticastUnsupported { .. }) => ensure(!supported, || "both devices report multicast, yet the plan was refused".into()),
        Err(e) => Err(e.into()),
    }
}
