"""Every invariant family of docs/design.md §8 catches a deliberately broken component.

One table row per family (two for the families with two checkers or two
ways to break): a component that violates it on purpose, a tiny story that
makes it act, and what the violation must say. Each row's run must record
the violation online, and `mastemu check` on its database must exit 1,
naming the family and printing the command that reproduces the run.

The broken components mostly come from `tests/support/broken.py`, shared
with the tests that introduced each checker; the ones for `allocation` and
`progress` are here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.common.cm.manager import ClusterManager
from actors.common.messages import AgentStart, ExecutePlan
from actors.mast.system import MastSystem
from emulator.actor import Actor
from emulator.cli import main as cli
from emulator.registry import builtin_scenarios, load_plugins, register_actor, register_system
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import convert_scenario, parse_raw
from emulator.units import MIN, H
from store import Store
from store.events import store_event
from store.mast.queue import Fence
from tests.support.broken import (
    CapBlindService,
    DataBlindRMS,
    DoubleAwardGMS,
    EagerCM,
    ForgetfulGMS,
    GangBreakingRMS,
    GenerousGMS,
    LossBlindRMS,
    RoomBlindService,
    UnfencedCandidate,
)
from tests.support.dsl import CHECKERS, job, preemption_story, scenario, workload
from tests.support.stories import TB, lake_story, preempted_gang
from tests.support.trace import started, store_events

load_plugins()
register_actor(UnfencedCandidate)

FAMILIES = (
    "lease-safety",  # 1
    "allocation",  # 2
    "gang",  # 3
    "auction",  # 4
    "colocation",  # 5
    "preemption",  # 6
    "quota",  # 7
    "no-lost-workload",  # 8
    "storage",  # 9
    "migration-cap",  # 9
    "progress",  # 10
)


# ---- broken components of this file ---------------------------------------------------------
@store_event("fleet.start")
async def start_unchecked(
    store: Store,
    fence: Fence,
    now_us: int,
    workload_id: str,
    job_name: str,
    cluster: str,
    priority: int,
    gpus: list[tuple[str, int]],
    cpu_hosts: list[str],
) -> tuple[int, int]:
    """BROKEN: books machines without looking at what is already allocated on them."""
    async with store.transaction() as conn:
        await conn.executemany(
            "INSERT INTO allocations (host, workload_id, job, gpus, cpu, since_us) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(h, workload_id, job_name, n, 0, now_us) for h, n in gpus]
            + [(h, workload_id, job_name, 0, 1, now_us) for h in cpu_hosts],
        )
    return 1, 0


class OverbookingCM(ClusterManager):
    """Runs each plan, then books the same GPUs again for a warm standby of the job."""

    async def execute(self, msg: ExecutePlan) -> None:
        await super().execute(msg)
        fence = await self.current_fence()
        if fence is not None and msg.gpus:
            await self.store(
                start_unchecked,
                fence,
                self.now_us,
                msg.workload_id,
                msg.job.name + "-standby",
                self.params.cluster,
                msg.priority,
                msg.gpus,
                (),
            )


class _ShiftingCM(ClusterManager):
    """Hands a restarted job's agent a starting point other than its checkpoint."""

    def shift(self, start: AgentStart) -> int:
        raise NotImplementedError

    def spawn(self, address: str, host: str, cls: type[Actor], params: Any = None) -> None:
        if isinstance(params, AgentStart) and params.attempt > 1:
            params = msgspec.structs.replace(params, progress_us=self.shift(params))
        super().spawn(address, host, cls, params)


class RewindingCM(_ShiftingCM):
    """Restarts a job from the beginning instead of from its checkpoint."""

    def shift(self, start: AgentStart) -> int:
        return 0


class LeapingCM(_ShiftingCM):
    """Restarts a job an hour of work past its checkpoint."""

    def shift(self, start: AgentStart) -> int:
        return start.progress_us + H


# ---- stories ---------------------------------------------------------------------------------
def _leader_lease(kind: str) -> dict[str, Any]:
    text = builtin_scenarios()["leader-lease"].read_text()
    raw = parse_raw(text.replace('kind = "lease-candidate"', f'kind = "{kind}"'), "leader-lease")
    assert isinstance(raw, dict)
    return raw


def _one_workload(kind: str) -> dict[str, Any]:
    return scenario([workload("W", "hi", 0, job(gpus=8))], kind=kind, duration="20m")


def _gang(kind: str) -> dict[str, Any]:
    # The preprocess job waits for a CPU victim's checkpoint; the trainer starts at once.
    return scenario(
        [
            workload("V", "lo", 0, job("prep", cpus=4, work=5 * H)),
            workload("G", "hi", 60 * MIN, job(gpus=8), job("prep", cpus=2)),
        ],
        regions=("east",),
        kind=kind,
        duration="3h",
    )


def _data_only_in_west(kind: str) -> dict[str, Any]:
    # The data is only in west, which L fills; east is free and (wrongly) bids.
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=5 * H, tables=("t",))),
            workload("H", "hi", 20 * MIN, job(gpus=8, tables=("t",))),
        ],
        tables=[{"name": "t", "size_bytes": 1, "home_region": "west"}],
        kind=kind,
        duration="1h",
    )


def _small_quota(kind: str) -> dict[str, Any]:
    raw = scenario(
        [workload("A", "small", 0, job(gpus=8)), workload("B", "small", 0, job(gpus=8))],
        kind=kind,
        duration="20m",
    )
    # Tenant "small" may use 8 GPUs at once: its second workload is over quota.
    raw["system"]["tenant_list"].append(
        {"name": "small", "priority": 2, "gpu_quota": 8, "cpu_quota": 0}
    )
    return raw


def _preemption(kind: str) -> dict[str, Any]:
    return preemption_story(kind=kind)


def _full_east(kind: str) -> dict[str, Any]:
    # east can store 1 TB, west 100 TB: the right service copies the 10 TB table to west.
    raw = lake_story(duration="1h")
    raw["system"]["kind"] = kind
    for r in raw["system"]["world_model"]["regions"]:
        r["storage_pb"] = {"east": 0.001, "west": 0.1, "lake": 1.0}[r["name"]]
    return raw


def _capped_copy(kind: str) -> dict[str, Any]:
    raw = lake_story(duration="2h", migration={"daily_cap_bytes": 6 * TB})
    raw["system"]["kind"] = kind
    raw["invariants"]["enabled"].append("migration-cap")
    return raw


def restart_story(kind: str = "mast", *, down_at_min: int = 35) -> dict[str, Any]:
    """J (2 h of work, a checkpoint every 20 min) loses its machine at `down_at_min`.

    J starts at 10 s and sets up for a few minutes, so at 35 min it has saved
    one checkpoint (20 min of work), at 50 min two. The CM restarts it on a
    spare from there, and the new attempt saves its own first checkpoint
    about 22 min later, before the run ends.
    """
    raw = scenario([workload("J", "hi", 0, job(gpus=8, work=2 * H))], regions=("east",))
    raw["system"]["kind"] = kind
    raw["duration"] = f"{down_at_min + 30}m"
    raw["faults"] = [{"action": "down", "at": f"{down_at_min}m", "node": "east/dc0/fd0/r0/m0"}]
    return raw


def _restart_late(kind: str) -> dict[str, Any]:
    # Rewound to zero, the new attempt's first checkpoint (20 min of work) is
    # below a checkpoint of two intervals.
    return restart_story(kind, down_at_min=50)


@dataclass(frozen=True)
class Row:
    """A broken component, the story that makes it act, and what the violation says."""

    family: str
    kind: str
    components: dict[str, type]
    story: Callable[[str], dict[str, Any]]
    says: tuple[str, ...] | str  # every fragment is in the violation's message


ROWS = [
    Row("lease-safety", UnfencedCandidate.kind, {}, _leader_lease, "stale effect"),
    Row(
        "allocation",
        "families-overbooking",
        {"cm": OverbookingCM},
        _one_workload,
        "16 GPUs allocated (of 8) to W/trainer, W/trainer-standby",
    ),
    Row("gang", "families-gang", {"rms": GangBreakingRMS}, _gang, "G RUNNING but jobs ['prep']"),
    Row(
        "auction",
        "families-double-award",
        {"gms": DoubleAwardGMS},
        _one_workload,
        "awarded to west while DISPATCHING",
    ),
    Row(
        "colocation",
        "families-data-blind",
        {"rms": DataBlindRMS},
        _data_only_in_west,
        "/trainer started in east without ready ['t']",
    ),
    Row(
        "preemption",
        "families-eager",
        {"cm": EagerCM},
        _preemption,
        "L/trainer released its machines before saving a checkpoint",
    ),
    Row("quota", "families-generous", {"gms": GenerousGMS}, _small_quota, "ranked within quota"),
    Row(
        "no-lost-workload",
        "families-forgetful",
        {"gms": ForgetfulGMS},
        _preemption,
        "L is RUNNING but none of its jobs",
    ),
    Row(
        "no-lost-workload",
        "families-loss-blind",
        {"rms": LossBlindRMS},
        preempted_gang,
        "L went DONE but not all its jobs finished their work (prep: STOPPED)",
    ),
    Row(
        "storage",
        "families-room-blind",
        {"migration": RoomBlindService},
        _full_east,
        "over its",
    ),
    Row(
        "migration-cap",
        "families-cap-blind",
        {"migration": CapBlindService},
        _capped_copy,
        "over the",
    ),
    Row(
        "progress",
        "families-rewinding",
        {"cm": RewindingCM},
        _restart_late,
        "J/trainer attempt 2 saves 20m00.000s of progress but started from its checkpoint",
    ),
    Row(
        "progress",
        "families-leaping",
        {"cm": LeapingCM},
        restart_story,
        # From 20 min + 1 h, 20 min of running make 1 h 40 min: 1 h 20 min of work.
        ("J/trainer attempt 2 saves 1h40m00.000s", "takes at least 1h20m00.000s"),
    ),
]


def run_raw(raw: dict[str, Any], out: Path, seed: int = 1) -> RunResult:
    """Run a scenario given as a dict, every checker it names plus `progress`, online."""
    enabled = raw.setdefault("invariants", {}).setdefault("enabled", [])
    if "progress" not in enabled and raw.get("system"):
        enabled.append("progress")
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, "families"), text, "families")
    return asyncio.run(execute(plan, seed=seed, out=out))


def check_offline(db: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["check", str(db)])
    return code, capsys.readouterr().out


def test_every_family_has_a_row() -> None:
    assert sorted({row.family for row in ROWS}) == sorted(FAMILIES)
    # The families are the ones the scenarios can enable.
    from emulator.invariants import CHECKERS as REGISTERED

    assert set(FAMILIES) <= set(REGISTERED)
    assert set(CHECKERS) < set(FAMILIES)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.family}:{r.kind}" for r in ROWS])
def test_a_broken_component_is_caught_online_and_offline(
    row: Row, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if row.components:
        register_system(MastSystem(row.kind, **row.components))
    result = run_raw(row.story(row.kind), tmp_path / "run.db")
    says = (row.says,) if isinstance(row.says, str) else row.says
    online = [v for v in result.violations if v[2] == row.family and all(f in v[3] for f in says)]
    assert result.status == "violated" and online, result.violations
    code, out = check_offline(result.out, capsys)
    assert code == 1
    assert any(
        line.startswith(f"VIOLATION {row.family} ") and all(f in line for f in says)
        for line in out.splitlines()
    ), out
    scenario_name = "scripted" if row.family != "lease-safety" else "leader-lease"
    assert f"reproduce: mastemu run {scenario_name} --seed 1" in out


def test_a_restart_from_the_checkpoint_breaks_no_progress_rule(
    tmp_path: Path, read_run: Callable[[Path], tuple[Any, list[Any]]]
) -> None:
    # The control for the progress rows: the same story with the real CM.
    result = run_raw(restart_story(), tmp_path / "run.db")
    assert result.violations == []
    _, rows = read_run(result.out)
    starts = [started(e) for e in store_events(rows, "fleet.start") if e.result]
    assert [s.attempt for s in starts] == [1, 2]
    assert starts[1].from_us == 20 * MIN  # attempt 2 resumes from the 20-minute checkpoint


def test_the_chaos_sweep_bench_prints_one_json_object(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Two seeds only (`mastemu bench chaos-sweep` runs 200). Failing runs'
    # databases would be kept in ./runs: here, the temporary folder.
    monkeypatch.chdir(tmp_path)
    code = cli.main(["bench", "chaos-sweep", "--seeds", "1-2", "--jobs", "2", "--json"])
    text = capsys.readouterr().out
    assert text.count("\n") == 1
    report = json.loads(text)
    assert (report["scenario"], report["seeds"], report["seed_range"]) == ("chaos", 2, "1-2")
    failed = {f["seed"] for f in report["failures"]}
    assert report["clean"] == 2 - len(failed)
    assert report["violations"] == sum(f["count"] for f in report["failures"])
    assert all(f["command"] == f"mastemu run chaos --seed {f['seed']}" for f in report["failures"])
    assert code == (1 if report["violations"] else 0)
    assert report["wall_s"] > 0 and report["seeds_per_min"] > 0
