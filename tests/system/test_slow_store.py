"""slow-store: for a window, the targeted actors' store calls answer late.

The call takes effect when it is made (at the caller's timestamps); only its
answer is held back by the fault's `latency`, while every other actor runs.
So a leader whose store is slower than its lease loses the lease while it
waits: the stories below check that it does, that a follower takes over, and
that lease-safety still holds (and catches a leader that trusts a lease it
heard about too late).
"""

from __future__ import annotations

import asyncio
import io
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from actors.common.cm.manager import ClusterManager
from actors.common.cm.recovery import CMRecovery
from actors.mast.system import MastSystem
from emulator.actor import Actor
from emulator.cli import main as cli
from emulator.registry import builtin_scenarios, load_plugins, register_actor, register_system
from emulator.run.faults import FaultInjector, nemesis_schedule
from emulator.run.replay import check
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import (
    Duration,
    NemesisSpec,
    SlowStoreFault,
    decode_scenario,
    scenario_json_schema,
)
from emulator.trace import TraceEvent
from emulator.units import MIN, H, S, parse_duration_us
from tests.support.broken import UnfencedCandidate
from tests.support.harness import make_kernel, record, spawn
from tests.support.rundb import trace_events
from tests.support.trace import events_of, store_events

load_plugins()
LEADER_LEASE = builtin_scenarios()["leader-lease"].read_text()
GMS_FAILOVER = builtin_scenarios()["gms-failover"].read_text()


def slow_fault(at: str, target: str, duration: str, latency: str) -> str:
    return (
        f'[[faults]]\naction = "slow-store"\nat = "{at}"\ntarget = "{target}"\n'
        f'duration = "{duration}"\nlatency = "{latency}"\n\n'
    )


def run_text(text: str, out: Path, until: str | None = None) -> RunResult:
    plan = plan_run(decode_scenario(text, "test.toml"), text, "test.toml")
    until_us = parse_duration_us(until) if until is not None else None
    return asyncio.run(execute(plan, seed=1, out=out, until_us=until_us))


def trace(db: Path) -> list[TraceEvent]:
    return trace_events(db)


def offline(db: Path) -> tuple[int, str]:
    out = io.StringIO()
    return asyncio.run(check(db, out=out)), out.getvalue()


def claims(events: list[TraceEvent], role: str) -> list[tuple[int, str, int]]:
    """(t, claimant, epoch) of every `lease.leader` decision for `role`."""
    return [
        (e.t_us, e.src, e.payload["epoch"])
        for e in events
        if e.kind == "decision" and e.type == "lease.leader" and e.payload["role"] == role
    ]


# ---- the kernel mechanism ---------------------------------------------------------
async def echo(_store: Any, value: int) -> int:
    return value


class Asker(Actor):
    """Asks the store every second and notes when each answer came back."""

    kind = "test-store-asker"

    async def on_start(self) -> None:
        self.answers: list[tuple[int, int, int]] = []  # (asked at, answered at, value)
        while True:
            asked = self.now_us
            value = await self.store(echo, asked)
            self.answers.append((asked, self.now_us, value))
            await self.sleep(S)


def test_a_slow_store_delays_only_the_answers_of_the_targeted_actor_during_its_window() -> None:
    k = make_kernel()
    spawn(k, Asker, "slow", "east/ctl0")
    spawn(k, Asker, "fast", "east/ctl1")
    injector = FaultInjector(k)
    injector.schedule(
        [
            SlowStoreFault(
                at=Duration(3 * S),
                target="slow",
                duration=Duration(10 * S),
                latency=Duration(4 * S),
            )
        ]
    )
    late = record(k, "slow-store")
    asyncio.run(k.run(30 * S))
    slow = k.instance("slow").answers  # type: ignore[union-attr]
    fast = k.instance("fast").answers  # type: ignore[union-attr]
    # The answer carries the value of the call as made: it took effect at once.
    assert all(asked == value for asked, _, value in slow + fast)
    assert all(answered == asked for asked, answered, _ in fast)
    delays = {asked // S: (answered - asked) // S for asked, answered, _ in slow}
    # Asked at 3, 8 and 13 s (inside [3 s, 13 s)): 4 s late each; before and after: at once.
    assert {t: d for t, d in delays.items() if d} == {3: 4, 8: 4}
    assert delays[0] == delays[2] == delays[13] == delays[14] == 0
    assert [e.t_us // S for e in late] == [3, 8]
    assert injector.windows == [(3 * S, 13 * S, "slow-store slow")]
    assert k.store_latency_us == {}


def test_a_caller_that_crashes_while_waiting_never_gets_the_late_answer() -> None:
    k = make_kernel()
    spawn(k, Asker, "slow", "east/ctl0")
    injector = FaultInjector(k)
    injector.schedule(
        [
            SlowStoreFault(
                at=Duration(0), target="slow", duration=Duration(H), latency=Duration(10 * S)
            )
        ]
    )
    k.at(5 * S, k.crash, "slow", "test", 2 * S)  # restarted at 7 s, its first call at 7 s
    asyncio.run(k.run(30 * S))
    answers = k.instance("slow").answers  # type: ignore[union-attr]
    # The new incarnation hears only its own calls (7 s, 18 s), never the one of 0 s.
    assert [(a // S, b // S) for a, b, _ in answers] == [(7, 17), (18, 28)]


def test_a_late_answer_waits_for_the_end_of_a_pause() -> None:
    k = make_kernel()
    spawn(k, Asker, "slow", "east/ctl0", at_us=S // 10)
    FaultInjector(k).schedule(
        [
            SlowStoreFault(
                at=Duration(0), target="slow", duration=Duration(S), latency=Duration(2 * S)
            )
        ]
    )
    k.at(S, k.pause, "slow", 5 * S)
    asyncio.run(k.run(10 * S))
    answers = k.instance("slow").answers  # type: ignore[union-attr]
    assert [(a // S, b // S) for a, b, _ in answers][:2] == [(0, 6), (7, 7)]


def test_the_final_heal_makes_every_slow_store_fast_again() -> None:
    k = make_kernel()
    spawn(k, Asker, "slow", "east/ctl0")
    injector = FaultInjector(k)
    injector.schedule(
        [
            SlowStoreFault(
                at=Duration(S), target="slow", duration=Duration(H), latency=Duration(3 * S)
            )
        ]
    )
    k.at(10 * S, injector.final_heal)
    ends = record(k, "fault")
    asyncio.run(k.run(20 * S))
    assert k.store_latency_us == {}
    assert [e.type for e in ends if e.type.startswith("slow-store")] == [
        "slow-store.start",
        "slow-store.end",
    ]
    answers = k.instance("slow").answers  # type: ignore[union-attr]
    assert all(b == a for a, b, _ in answers if a >= 10 * S)


# ---- leases under a slow store ---------------------------------------------------
SLOW_LEADER = LEADER_LEASE.replace(
    "[invariants]", slow_fault("2h", "leader of demo/leader", "2m", "15s") + "[invariants]"
)


def test_a_leader_whose_store_is_slower_than_its_lease_loses_it(tmp_path: Path) -> None:
    result = run_text(SLOW_LEADER, tmp_path / "a.db", until="2h10m")
    assert result.status == "ok" and result.violations == []
    assert offline(result.out)[0] == 0
    events = trace(result.out)
    (start,) = [e for e in events if e.kind == "fault" and e.type == "slow-store.start"]
    slowed = start.payload["actor"]
    before = [c for c in claims(events, "demo/leader") if c[0] < start.t_us]
    assert before[-1][1] == slowed  # it was the leader when its store slowed down
    # Its renewal at 2 h took effect but came back 15 s later, after its 10 s
    # lease: the other candidate took the next epoch within ttl + renew_every.
    t, successor, epoch = next(c for c in claims(events, "demo/leader") if c[0] > start.t_us)
    assert successor != slowed and epoch == before[-1][2] + 1
    assert t - start.t_us <= 13 * S
    lost = [e for e in events if e.type == "lease.lost" and e.src == slowed]
    assert lost and lost[0].t_us > t
    # Requests it took in before it lost the lease were refused by the fence.
    late = [e for e in store_events(events, "lease.effect") if e.src == slowed and e.t_us > t]
    assert late and not any(e.result for e in late)
    # Each of its calls in the window was answered 15 s late, and only those.
    delayed = events_of(events, "slow-store")
    assert delayed and {e.src for e in delayed} == {slowed}
    assert all(e.latency_us == 15 * S for e in delayed)
    assert all(start.t_us <= e.t_us < start.t_us + 2 * MIN for e in delayed)


def test_a_leader_trusting_a_lease_it_heard_of_too_late_is_caught(tmp_path: Path) -> None:
    register_actor(UnfencedCandidate)
    broken = 'kind = "lease-candidate"', f'kind = "{UnfencedCandidate.kind}"'
    # Without the slow store, the broken candidate does no harm before 2h10m...
    calm = run_text(LEADER_LEASE.replace(*broken), tmp_path / "calm.db", until="2h10m")
    assert calm.violations == []
    # ...with it, its writes under the epoch it lost while waiting land, and are caught.
    result = run_text(SLOW_LEADER.replace(*broken), tmp_path / "slow.db", until="2h10m")
    stale = [v for v in result.violations if "stale effect" in v[3]]
    assert stale and all(2 * H < v[1] < 2 * H + 2 * MIN for v in stale)
    code, text = offline(result.out)
    assert code == 1 and "stale effect" in text


def mast_with_slow_store(target: str) -> str:
    """gms-failover with its crash replaced by a slow store of `target` (45 s, ttl 30 s)."""
    text, n = re.subn(
        r"\[\[faults\]\].*?restart_after = \"10m\"\n",
        slow_fault("46m10.1s", target, "3m", "45s"),
        GMS_FAILOVER,
        flags=re.S,
    )
    assert n == 1
    return text


@pytest.mark.parametrize(
    ("target", "role"), [("leader of gms", "gms"), ("leader of rms/us-east", "rms/us-east")]
)
def test_mast_a_slow_leader_hands_its_role_to_a_follower_and_no_invariant_breaks(
    tmp_path: Path, target: str, role: str
) -> None:
    text = mast_with_slow_store(target)
    result = run_text(text, tmp_path / "a.db")
    assert result.status == "ok" and result.violations == []
    events = trace(result.out)
    epochs = claims(events, role)
    assert [e for _, _, e in epochs] == [1, 2]
    assert epochs[0][1] != epochs[1][1]
    # The last renewal took effect by 10 s into the window; its lease ran 30 s more;
    # the follower asks every 10 s.
    assert 46 * MIN < epochs[1][0] <= 46 * MIN + 10 * S + 51 * S
    # No other role changed hands: the slow store hit one actor only.
    changed = {
        e.payload["role"] for e in events if e.type == "lease.leader" and e.payload["epoch"] > 1
    }
    assert changed == {role}
    if role == "gms":
        again = run_text(text, tmp_path / "b.db")
        assert again.trace_hash == result.trace_hash


# ---- the fault in scenarios, the nemesis and the schema ---------------------------
def run_cli(capsys: pytest.CaptureFixture[str], text: str, tmp_path: Path) -> tuple[int, str]:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "run.db"
    code = cli.main(["run", str(path), "--until", "1s", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and not out.exists()
    return code, err.removeprefix(f"error: {path}: ")


@pytest.mark.parametrize(
    ("fault", "key_path", "fragment"),
    [
        (slow_fault("1h", "leader of demo/leader", "1m", "0s"), "faults[3].latency", "positive"),
        (slow_fault("1h", "demo/nowhere", "1m", "5s"), "faults[3].target", "unknown actor"),
        (slow_fault("1h", "region mars", "1m", "5s"), "faults[3].target", "unknown region"),
        (slow_fault("1h", "leader of demo/leader", "1m", "-5s"), "faults[3].latency", "negative"),
        (
            slow_fault("1h", "leader of demo/leader", "1m", "5s").replace('duration = "1m"\n', ""),
            "faults[3].duration",
            "missing required key",
        ),
    ],
)
def test_a_bad_slow_store_fault_exits_2_naming_its_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fault: str, key_path: str, fragment: str
) -> None:
    code, err = run_cli(
        capsys, LEADER_LEASE.replace("[invariants]", fault + "[invariants]"), tmp_path
    )
    assert code == 2
    assert err.startswith(f"{key_path}: ") and fragment in err, err


class SilentRecovery(CMRecovery):
    """Reports none of the ends a predecessor committed but did not tell."""

    async def report_unheard_ends(self) -> None:
        return None


class SilentSuccessorCM(ClusterManager):
    """Reports none of the ends its predecessor committed but did not tell."""

    Recovery = SilentRecovery


def cm_dies_mid_move(kind: str = "mast") -> str:
    """power-domain with the CM leader dying after it freed a failed job, before it restarted it.

    fd2 fails at 50 m and the CM moves `captioner` to spares. With a 5 s
    store it marks the machines failed (answered at 50m05s), checks that the
    job's dispatch stands (answered at 50m10s) and frees its machines at
    50m10s (answered at 50m15s); it dies at 50m12s, before it restarts the job.
    """
    text = (
        builtin_scenarios()["power-domain"]
        .read_text()
        .replace(
            "[invariants]",
            slow_fault("49m59s", "leader of cm/us-east/c0", "3m", "5s")
            + '[[faults]]\naction = "crash"\nat = "50m12s"\ntarget = "cm/us-east/c0/0"\n'
            'restart_after = "5m"\n\n[invariants]',
        )
    )
    return text.replace('kind = "mast"', f'kind = "{kind}"', 1)


def test_mast_a_cm_dying_while_it_moves_a_failed_job_loses_nothing(tmp_path: Path) -> None:
    result = run_text(cm_dies_mid_move(), tmp_path / "p.db")
    assert result.status == "ok" and result.violations == []
    events = trace(result.out)
    (crash,) = [e for e in events if e.kind == "fault" and e.type == "crash.start"]
    freed = store_events(events, "fleet.release", "captioner")
    # The story happened: freed (STOPPED) by the dying leader before its crash,
    # and not restarted by it.
    assert freed[0].src == crash.payload["actor"] and freed[0].t_us < crash.t_us
    assert freed[0].state == "STOPPED" and freed[0].result is True
    restarts = [
        e for e in store_events(events, "fleet.start", "captioner") if e.t_us > freed[0].t_us
    ]
    assert restarts and all(e.src != crash.payload["actor"] for e in restarts)
    # Its successor told the RMS the job had ended, the workload went back to
    # the queue and ran to its end.
    (told,) = [e for e in events if e.kind == "decision" and e.type == "cm.end-reported"]
    assert told.payload == {"workload": "captioner", "job": "trainer", "reason": "failed"}
    assert told.t_us - crash.t_us < 45 * S  # ttl 30 s + renew_every 10 s
    with sqlite3.connect(result.out) as c:
        (state,) = c.execute("SELECT state FROM workloads WHERE id = 'captioner'").fetchone()
    assert state == "DONE"


def test_mast_a_successor_cm_that_does_not_report_such_an_end_is_caught(tmp_path: Path) -> None:
    register_system(MastSystem("mast-silent-successor", cm=SilentSuccessorCM))
    result = run_text(cm_dies_mid_move("mast-silent-successor"), tmp_path / "p.db")
    assert any(
        v[2] == "no-lost-workload" and v[3].startswith("captioner is RUNNING but none")
        for v in result.violations
    ), result.violations


def test_a_region_target_slows_every_actor_of_its_control_plane(tmp_path: Path) -> None:
    text = LEADER_LEASE.replace(
        "[invariants]", slow_fault("30m", "region eu-west", "1m", "2s") + "[invariants]"
    )
    result = run_text(text, tmp_path / "r.db", until="40m")
    assert result.violations == []
    assert [w[2] for w in result.fault_windows] == ["slow-store demo/eu-west"]


def test_the_nemesis_draws_slow_stores_that_end_before_the_final_heal() -> None:
    spec = NemesisSpec(
        enabled=True,
        start=Duration(MIN),
        actions=["slow-store"],
        store_latency_mean=Duration(30 * S),
    )
    faults, heal_at = nemesis_schedule(
        spec,
        random.Random("slow"),
        run_us=10 * H,
        actors=["a", "b"],
        roles=["svc"],
        regions=["east", "west"],
        nodes=[],
    )
    assert len(faults) > 10 and all(isinstance(f, SlowStoreFault) for f in faults)
    assert all(f.at + f.duration <= heal_at and f.latency >= 1_000 for f in faults)
    assert {f.target for f in faults} == {"leader of svc", "a", "b"}
    latencies = sorted(f.latency for f in faults)
    assert 5 * S < latencies[len(latencies) // 2] < 60 * S  # around the 30 s mean


def test_the_schema_knows_the_slow_store_fault() -> None:
    text = str(scenario_json_schema())
    assert "slow-store" in text and "store_latency_mean" in text
