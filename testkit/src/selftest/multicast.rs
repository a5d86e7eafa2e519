//! NVLink multicast's host code on a GPU, short of creating an object (never on the lent
//! machines): the team check against what the device reports, and the driver's
//! granularity for a team of two.

use host_shim::Error;
use host_shim::multicast::{check_team, granularity};

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
