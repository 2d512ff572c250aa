"""Credit of a pending workload (MAST §4.2, expressions 10 and 11).

Credit breaks ties between workloads of the same priority: the GMS dispatches
by ⟨priority, credit⟩, highest credit first. It grows with how long the
workload has waited, up to a cap, and with how far its tenant is below the
fleet's average use:

    credit = w_age * min(age_s, age_cap_s) + w_fair * (1 - tenant_usage_avg / all_usage_avg)

With the defaults, an hour of waiting is worth 3,600 and the whole fair-share
term is worth at most 3,600 as well: a tenant that used nothing lately gains
what an hour in the queue would give; waiting stops counting after a day.
"""

from __future__ import annotations

import math

import msgspec

from emulator.units import US_PER_S


class CreditParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Weights of the credit formula; all must be finite and >= 0.

    `w_age` is credit per second waited, `age_cap_s` the age beyond which
    waiting adds nothing, `w_fair` the weight of the fair-share term (whose
    factor is at most 1).
    """

    w_age: float = 1.0
    age_cap_s: float = 86_400.0
    w_fair: float = 3_600.0

    def __post_init__(self) -> None:
        for name in ("w_age", "age_cap_s", "w_fair"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"policy.mast.credit.{name} must be finite and >= 0, got {value}")


DEFAULT_CREDIT = CreditParams()


def credit(
    age_us: int,
    tenant_usage_avg: float,
    all_usage_avg: float,
    params: CreditParams = DEFAULT_CREDIT,
) -> float:
    """Expression 10 + 11 for one workload.

    Args:
        age_us: how long the workload has been pending (now - submit), in
            microseconds of emulated time.
        tenant_usage_avg: the workload's tenant's resources in use, averaged
            over the GMS's usage window (a time average of GPU-equivalents
            held by its running jobs, e.g. GPUs + 8 x CPU machines, sampled
            over the last window), i.e. window_avg(tenant.resources_used).
        all_usage_avg: the same window average summed over all tenants, in the
            same unit and over the same window; it includes the tenant's own.
        params: the weights.

    Returns:
        The credit. With `all_usage_avg == 0` nobody used anything, so every
        tenant is as far below average as can be: the fair-share factor is 1.

    Raises:
        ValueError: a negative age or usage.
    """
    if age_us < 0 or tenant_usage_avg < 0 or all_usage_avg < 0:
        raise ValueError(
            f"credit: age and usages must be >= 0, got age_us={age_us}, "
            f"tenant_usage_avg={tenant_usage_avg}, all_usage_avg={all_usage_avg}"
        )
    age_term = params.w_age * min(age_us / US_PER_S, params.age_cap_s)
    share = 0.0 if all_usage_avg == 0 else tenant_usage_avg / all_usage_avg
    return age_term + params.w_fair * (1.0 - share)
