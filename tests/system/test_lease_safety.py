"""lease-safety: one leader per epoch, no effect from a stale epoch — and broken parts are caught.

The invariant is judged from what the store committed (store events) and what
actors claim (decisions). Each broken component below violates it on purpose;
both the online checker (during the run) and the offline one (`mastemu check`
over the run database) must catch it.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from actors.demo.lease import LeaseCandidate
from emulator.registry import builtin_scenarios, load_plugins, register_actor
from emulator.run.replay import check
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import decode_scenario
from store import Store, leases
from store.events import store_event
from store.leases import Lease
from tests.support.broken import UnfencedCandidate

load_plugins()
LEADER_LEASE = builtin_scenarios()["leader-lease"].read_text()


def run_text(text: str, tmp_path: Path, seed: int = 1, until: str | None = None) -> RunResult:
    scenario = decode_scenario(text, "test.toml")
    plan = plan_run(scenario, text, "test.toml")
    until_us = None
    if until is not None:
        from emulator.units import parse_duration_us

        until_us = parse_duration_us(until)
    return asyncio.run(execute(plan, seed=seed, out=tmp_path / f"run-{seed}.db", until_us=until_us))


def offline(db: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = asyncio.run(check(db, out=out))
    return code, out.getvalue()


# ---- the real thing holds -------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2])
def test_leader_lease_keeps_one_leader_per_epoch(tmp_path: Path, seed: int) -> None:
    result = run_text(LEADER_LEASE, tmp_path, seed=seed)
    assert result.status == "ok" and result.violations == []
    assert offline(result.out)[0] == 0


def test_a_random_nemesis_of_pauses_crashes_and_partitions_breaks_nothing(tmp_path: Path) -> None:
    text = LEADER_LEASE.replace(
        "[invariants]",
        """[nemesis]
enabled = true
start = "5m"
interval_mean = "4m"
duration_mean = "40s"
actions = ["crash", "pause", "partition", "loss", "duplicate", "delay"]

[invariants]""",
    )
    for seed in (11, 12, 13):
        result = run_text(text, tmp_path, seed=seed, until="3h")
        assert result.violations == [], result.violations
        assert len(result.fault_windows) > 20
        assert offline(result.out)[0] == 0


# ---- broken components are caught ------------------------------------------------
@store_event("lease.acquire")
async def greedy_acquire(
    store: Store, role: str, candidate: str, now_us: int, ttl_us: int, fresh: bool = False
) -> Lease:
    """BROKEN: grants the current epoch to anyone who asks (a lost compare-and-set)."""
    current = store.leases.get(role)
    epoch = current.epoch if current is not None else 1
    await store.write(
        "INSERT INTO leases (role, holder, epoch, expires_at_us) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (role) DO UPDATE "
        "SET holder = excluded.holder, expires_at_us = excluded.expires_at_us",
        (role, candidate, epoch, now_us + ttl_us),
    )
    lease = Lease(role, candidate, epoch, now_us + ttl_us)
    store.leases.apply_committed(lease)
    return lease


class GreedyCandidate(LeaseCandidate):
    """A candidate whose lease acquisition skips the compare-and-set."""

    kind = "test-greedy-candidate"

    async def _renew(self) -> None:
        p = self.params
        lease = await self.store(greedy_acquire, p.role, self.address, self.now_us, p.lease_ttl)
        if lease.epoch != self.epoch or not getattr(self, "claimed", False):
            self.epoch = lease.epoch
            self.claimed = True
            self.decision("lease.leader", {"role": p.role, "epoch": lease.epoch})


def _with_kind(kind: str) -> str:
    return LEADER_LEASE.replace('kind = "lease-candidate"', f'kind = "{kind}"')


def test_an_unfenced_store_write_is_caught_online_and_offline(tmp_path: Path) -> None:
    register_actor(UnfencedCandidate)
    result = run_text(_with_kind(UnfencedCandidate.kind), tmp_path)
    assert result.status == "violated"
    stale = [v for v in result.violations if "stale effect" in v[3]]
    assert stale, result.violations
    # The stale write happens when the frozen leader wakes at 5 h 00 m 15 s.
    assert any(5 * 3600 * 10**6 <= v[1] <= 5 * 3600 * 10**6 + 20 * 10**6 for v in stale)
    code, text = offline(result.out)
    assert code == 1 and "stale effect" in text and "reproduce: mastemu run" in text


def test_two_leaders_in_one_epoch_are_caught_online_and_offline(tmp_path: Path) -> None:
    register_actor(GreedyCandidate)
    result = run_text(_with_kind(GreedyCandidate.kind), tmp_path, until="10m")
    assert result.status == "violated"
    assert any("two leaders of demo/leader in epoch 1" in v[3] for v in result.violations)
    assert any("both claim to lead" in v[3] for v in result.violations)
    code, text = offline(result.out)
    assert code == 1 and "two leaders" in text


def test_real_lease_functions_fence_a_deposed_leaders_late_write(tmp_path: Path) -> None:
    async def story() -> tuple[bool, bool, list[str]]:
        async with Store.open_ctx(tmp_path / "f.db") as store:
            a = await leases.acquire(store, "r", "a", 0, 10)
            assert a is not None and a.epoch == 1
            b = await leases.acquire(store, "r", "b", 10, 10)  # a's lease ran out
            assert b is not None and b.epoch == 2
            late = await leases.fenced_effect(store, "r", "a", 1, 11, b"late")
            fresh = await leases.fenced_effect(store, "r", "b", 2, 11, b"ok")
            return late, fresh, [e.holder for e in await leases.effects(store, "r")]

    late, fresh, holders = asyncio.run(story())
    assert (late, fresh, holders) == (False, True, ["b"])
