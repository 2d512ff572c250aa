"""Credit (MAST expressions 10 + 11): the age term, its cap, the fair-share term."""

from __future__ import annotations

import math

import pytest

from actors.policies.mast.credit import CreditParams, credit
from emulator.units import S

DEFAULT = CreditParams()  # w_age=1 per s, age_cap_s=86,400, w_fair=3,600
SMALL = CreditParams(w_age=2.0, age_cap_s=100.0, w_fair=10.0)

CASES = [
    # (name, age_us, tenant_avg, all_avg, params, expected)
    # 600 s < cap: 1*600 + 3600*(1 - 25/100) = 600 + 2700
    ("age below the cap", 600 * S, 25.0, 100.0, DEFAULT, 3_300.0),
    # 2 days > cap: 1*86400 + 3600*(1 - 50/100) = 86400 + 1800
    ("age above the cap", 2 * 86_400 * S, 50.0, 100.0, DEFAULT, 88_200.0),
    # exactly at the cap, tenant idle: 86400 + 3600*(1 - 0)
    ("age at the cap, idle tenant", 86_400 * S, 0.0, 100.0, DEFAULT, 90_000.0),
    # fresh, above-average user (80 of 100): 0 + 3600*0.2
    ("fair share above average", 0, 80.0, 100.0, DEFAULT, 720.0),
    # fresh, below-average user (10 of 100): 0 + 3600*0.9
    ("fair share below average", 0, 10.0, 100.0, DEFAULT, 3_240.0),
    # the tenant is the only user: 3600*(1 - 1) = 0, age 30 s
    ("sole user", 30 * S, 64.0, 64.0, DEFAULT, 30.0),
    # nobody used anything: fair factor 1 -> 3600, plus 60 s of age
    ("zero usage anywhere", 60 * S, 0.0, 0.0, DEFAULT, 3_660.0),
    # 300 s capped at 100 s, x2 = 200; 10*(1 - 30/60) = 5
    ("custom weights", 300 * S, 30.0, 60.0, SMALL, 205.0),
    # sub-second age counts fractionally: 0.5 s * 1 + 3600 * (1 - 0)
    ("half a second", S // 2, 0.0, 10.0, DEFAULT, 3_600.5),
]


@pytest.mark.parametrize(
    ("age_us", "tenant", "total", "params", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_credit_table(age_us, tenant, total, params, expected) -> None:
    assert credit(age_us, tenant, total, params) == pytest.approx(expected)


def test_default_params_are_used_when_omitted() -> None:
    # 10 s + 3600 * (1 - 1/4) = 10 + 2700
    assert credit(10 * S, 1.0, 4.0) == pytest.approx(2_710.0)


def test_lighter_tenant_outranks_heavier_at_equal_age() -> None:
    light = credit(3_600 * S, 10.0, 100.0)  # 3600 + 3240 = 6840
    heavy = credit(3_600 * S, 90.0, 100.0)  # 3600 + 360 = 3960
    assert light > heavy
    assert light - heavy == pytest.approx(2_880.0)


def test_waiting_past_the_cap_adds_nothing() -> None:
    assert credit(86_400 * S, 5.0, 10.0) == credit(10 * 86_400 * S, 5.0, 10.0)


@pytest.mark.parametrize("field", ["w_age", "age_cap_s", "w_fair"])
@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_params_reject_negative_and_non_finite(field: str, bad: float) -> None:
    with pytest.raises(ValueError, match=f"credit.{field}"):
        CreditParams(**{field: bad})


@pytest.mark.parametrize(("age_us", "tenant", "total"), [(-1, 0.0, 0.0), (0, -1.0, 1.0)])
def test_negative_inputs_are_rejected(age_us: int, tenant: float, total: float) -> None:
    with pytest.raises(ValueError):
        credit(age_us, tenant, total)
