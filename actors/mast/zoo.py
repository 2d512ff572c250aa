"""The bug zoo: MAST's seeded protocol bugs, each with a witness scenario.

Every bug is a small `if self.bug(NAME):` in the actor code (one, in the
store's lease code, `store.bug(NAME)`), next to the right behaviour (grep
the name). `actors/plugin.py` registers the catalogue
(`emulator/bugs.py`); a scenario switches bugs on with `bugs = [NAME, …]`.

A witness is a short scripted scenario (actors/mast/scripted.py) with
explicit faults: with `bugs = [NAME]` added, the invariant named here is
violated; without it the run is clean. They are stored as JSON in
`scenarios/zoo/NAME.json` (written by `write_witnesses`, checked equal to
these builders by the tests) so that a benchmark can run them as files.

Depth is measured, not guessed: how many of random seeds 1..SEEDS_TRIED
of the built-in `chaos` scenario (its nemesis, `bugs` added) caught the bug
with `mastemu sweep FILE --seeds 1-50 --jobs 1`. A bug `chaos` cannot reach
for a setting it lacks (pipelined auctions, data at home only, a migration
service) is judged on a `family`: the scenario with that setting and a
random nemesis (`family()` builds it). Shallow: at least half the seeds;
medium: 3 to 24 of 50; deep: at most 2 (a fault must land inside one
protocol window, as in the witness). Every family is clean over the same
seeds without bugs.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scenarios
from actors.mast.scripted import crash, job, pause, preemption_story, scenario, workload
from emulator.bugs import Depth
from emulator.units import MIN, H

# Random seeds 1..SEEDS_TRIED measured each bug (`mastemu sweep … --jobs 1`).
SEEDS_TRIED = 50
WITNESS_DIR = Path(scenarios.__file__).resolve().parent / "zoo"


@dataclass(frozen=True)
class ZooBug:
    name: str
    description: str
    depth: Depth
    invariant: str
    witness: Callable[[], dict[str, Any]]
    # Measured (module docstring): of random seeds 1..SEEDS_TRIED of `chaos` with
    # the bug on, how many caught it, and the first that did (None: none).
    chaos_caught: int
    chaos_first_seed: int | None
    # The random family the depth is judged on when `chaos` cannot reach the bug
    # (a setting it lacks): a built-in scenario and `--set`-style overrides.
    family: str = "chaos"
    family_overrides: tuple[tuple[str, Any], ...] = ()
    family_caught: int | None = None  # of seeds 1..SEEDS_TRIED; None: the family is chaos


# ---- witnesses ----------------------------------------------------------------------
def _named(name: str, raw: dict[str, Any], description: str) -> dict[str, Any]:
    raw["name"] = f"zoo-{name}"
    raw["description"] = description
    return raw


def _quota() -> dict[str, Any]:
    """Tenant `lo` may use 16 GPUs: A (16) runs; B (16) queued behind it is over quota."""
    raw = scenario(
        [
            workload("A", "lo", 0, job(gpus=16, work=2 * H)),
            workload("B", "lo", 5 * MIN, job(gpus=16)),
        ],
        regions=("east",),
        duration="30m",
    )
    raw["system"]["tenant_list"][1]["gpu_quota"] = 16
    return raw


def _data() -> dict[str, Any]:
    """Table `t` lives in west only; east has the same machines and wins a tie by name."""
    return scenario(
        [workload("W", "hi", 0, job(gpus=8))],
        tables=[{"name": "t", "size_bytes": 1, "home_region": "west", "replicas": []}],
        duration="30m",
    )


def _preemption(
    *, checkpoint_cost: str | None = None, lease_s: int | None = None, duration: str = "2h"
) -> dict[str, Any]:
    raw = preemption_story(duration=duration)
    if checkpoint_cost is not None:
        raw["system"]["checkpoint_cost"] = checkpoint_cost
    if lease_s is not None:
        raw["system"]["lease"] = {"ttl": f"{lease_s}s", "renew_every": "1s"}
    return raw


def _gang_preempted() -> dict[str, Any]:
    """L runs as two jobs of 16 GPUs; H (16 GPUs) preempts one of them at 1 h."""
    return scenario(
        [
            workload("L", "lo", 0, job("a", gpus=16, work=3 * H), job("b", gpus=16, work=3 * H)),
            workload("H", "hi", 60 * MIN, job(gpus=16)),
        ],
        regions=("east",),
        duration="2h",
    )


def _takeover_mid_checkpoint() -> dict[str, Any]:
    """H preempts L at about 1 h; L's checkpoint takes 4 min; the CM leader dies in it."""
    raw = _preemption(checkpoint_cost="4m", lease_s=5)
    raw["faults"] = [crash("leader of cm/east/c0", "62m", "10m")]
    return raw


def _machine_fails() -> dict[str, Any]:
    """W (8 GPUs) checkpoints at 20 min; at 30 min its machine fails, spares wait."""
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=8, work=2 * H))], regions=("east",), duration="1h"
    )
    raw["faults"] = [{"action": "down", "at": "30m", "node": _FIRST_A100, "duration": "10m"}]
    return raw


def _machine_fails_no_spare() -> dict[str, Any]:
    """W holds all 32 GPUs of east; at 30 min one of its machines fails: no spare to move to."""
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=32, work=2 * H))], regions=("east",), duration="1h"
    )
    raw["faults"] = [{"action": "down", "at": "30m", "node": _FIRST_A100, "duration": "10m"}]
    return raw


def _rms_failover_while_running() -> dict[str, Any]:
    """W (30 min of work) runs in east; its RMS leader dies at 10 min, a follower takes over."""
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=8, work=30 * MIN))], regions=("east",), duration="1h"
    )
    raw["faults"] = [crash("leader of rms/east", "10m", "5m")]
    return raw


def _pipelined() -> dict[str, Any]:
    """Four 16-GPU workloads at once, four auctions in flight, 32 GPUs: two must wait."""
    raw = scenario(
        [workload(f"W{i}", "hi", 0, job(gpus=16)) for i in range(4)],
        regions=("east",),
        duration="20m",
    )
    raw["system"]["auction"] = {"pipeline": 4}
    return raw


def _gms_paused_in_pipelined_batch() -> dict[str, Any]:
    """Four workloads at once, four auctions in flight to east and west; the GMS leader
    (east) pauses 5 ms after opening them, before west's bids cross the WAN, and is
    back at 20 s: its 5-s lease lapsed meanwhile and a follower took over at 16 s."""
    raw = scenario([workload(f"W{i}", "hi", 0, job(gpus=16)) for i in range(4)], duration="20m")
    raw["system"]["auction"] = {"pipeline": 4}
    raw["system"]["lease"] = {"ttl": "5s", "renew_every": "1s"}
    raw["faults"] = [pause("leader of gms", "10.005s", "10s")]
    return raw


def _rms_dark() -> dict[str, Any]:
    """Every RMS of east is down from 10 min for 20 min; its CMs lead and W runs on."""
    raw = scenario([workload("W", "hi", 0, job(gpus=8, work=2 * H))], duration="45m")
    raw["faults"] = [crash("all of rms/east", "10m", "20m")]
    return raw


def _cm_darker_than_rms() -> dict[str, Any]:
    """East (W's data only there) dark from 10 min: its RMSs for 15 min, its CM for 45.

    The GMS gives east up; W is won by east again once its RMS is back, and
    that dispatch times out with the CM still dark and W's first attempt still
    recorded live in the same cluster.
    """
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=8, work=2 * H))],
        tables=[{"name": "t", "size_bytes": 1, "home_region": "east", "replicas": []}],
        duration="80m",
    )
    raw["faults"] = [
        pause("all of rms/east", "10m", "15m"),
        pause("all of cm/east/c0", "10m", "45m"),
    ]
    return raw


def _gms_failover_mid_dispatch() -> dict[str, Any]:
    """H's job a starts at once, its job b waits 4 min for L's checkpoint; the GMS dies then."""
    raw = scenario(
        [
            workload("L", "lo", 0, job(gpus=24, work=3 * H)),
            workload("H", "hi", 60 * MIN, job("a", gpus=8), job("b", gpus=16)),
        ],
        regions=("east",),
        duration="90m",
    )
    raw["system"]["checkpoint_cost"] = "4m"
    raw["system"]["lease"] = {"ttl": "5s", "renew_every": "1s"}
    raw["faults"] = [crash("leader of gms", "61m30s", "10m")]
    return raw


def _rms_failover_mid_dispatch() -> dict[str, Any]:
    """As for the GMS, but the RMS leader of east dies while H's job b waits for L's checkpoint."""
    raw = _gms_failover_mid_dispatch()
    raw["faults"] = [crash("leader of rms/east", "61m30s", "10m")]
    return raw


def _equal_priority() -> dict[str, Any]:
    """L (lo) fills east; at 1 h L2, of the same tenant and priority, needs 16 GPUs."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=3 * H)),
            workload("L2", "lo", 60 * MIN, job(gpus=16)),
        ],
        regions=("east",),
        duration="90m",
    )


def _pause_to_expiry() -> dict[str, Any]:
    """W runs in east; the CM leader renews its lease (30 s) every 10 s, last at 50 s
    before a pause from 55 s that ends at 80 s, the very instant the lease expires."""
    raw = scenario(
        [workload("W", "hi", 0, job(gpus=8, work=2 * H))], regions=("east",), duration="20m"
    )
    raw["faults"] = [pause("leader of cm/east/c0", "55s", "25s")]
    return raw


def _wan_partition() -> dict[str, Any]:
    """The built-in `wan-partition-migration`: copies pause under a partition, then resume."""
    path = WITNESS_DIR.parent / "wan-partition-migration.toml"
    return tomllib.loads(path.read_text(encoding="utf-8"))


# `chaos`'s nemesis, for a family whose built-in scenario has explicit faults only.
_NEMESIS: dict[str, Any] = {
    "enabled": True,
    "start": "5m",
    "heal_at": "1h30m",
    "interval_mean": "4m",
    "duration_mean": "2m",
    "actions": ["crash", "pause", "partition", "loss", "duplicate", "delay", "down"],
}

# The scripted world's first A100 machine of east (its machines are named in order).
_FIRST_A100 = "east/dc0/fd0/r0/m0"

ZOO: tuple[ZooBug, ...] = (
    # ---- shallow: most random chaos seeds catch them -------------------------------------
    ZooBug(
        "gms-quota-ignores-running",
        "the GMS quota scan forgets what each tenant already runs (gms.py `_rank`)",
        "shallow",
        "quota",
        _quota,
        chaos_caught=50,
        chaos_first_seed=1,
    ),
    ZooBug(
        "cm-frees-victim-before-checkpoint",
        "a CM frees a preemption victim's machines when it orders the stop, "
        "before the victim's checkpoint is saved",
        "shallow",
        "preemption",
        lambda: _preemption(),
        chaos_caught=49,
        chaos_first_seed=1,
    ),
    ZooBug(
        "rms-ends-before-gang-stops",
        "an RMS reports a gang ended when its first job stops, while the others still run",
        "shallow",
        "gang",
        _gang_preempted,
        chaos_caught=49,
        chaos_first_seed=1,
    ),
    ZooBug(
        "rms-reports-preempting-dispatch-early",
        "an RMS reports a preempting dispatch started while its plans still wait "
        "for the victims' checkpoints",
        "shallow",
        "gang",
        lambda: _preemption(checkpoint_cost="4m"),
        chaos_caught=49,
        chaos_first_seed=1,
    ),
    ZooBug(
        "cm-restart-keeps-old-allocation",
        "a CM restarts a job off a failed machine without freeing the old attempt's machines",
        "shallow",
        "allocation",
        _machine_fails,
        chaos_caught=45,
        chaos_first_seed=1,
    ),
    ZooBug(
        "rms-forgets-hold",
        "with pipelined auctions an RMS announces a bid's hold but never holds the "
        "machines, so its next bid promises them again",
        "shallow",
        "auction",
        _pipelined,
        chaos_caught=0,
        chaos_first_seed=None,
        family_overrides=(("system.auction", {"pipeline": 4}),),
        family_caught=50,
    ),
    ZooBug(
        "rms-skips-data-check",
        "an RMS bids for a workload whose input tables have no ready replica in its region",
        "shallow",
        "colocation",
        _data,
        chaos_caught=0,
        chaos_first_seed=None,
        family_overrides=(("system.data_placement", "home-only"),),
        family_caught=50,
    ),
    ZooBug(
        "rms-preempts-equal-priority",
        "an RMS plans one priority level too high, so it may preempt a job of "
        "the workload's own priority",
        "shallow",
        "preemption",
        _equal_priority,
        chaos_caught=50,
        chaos_first_seed=1,
    ),
    ZooBug(
        "rms-rebuild-forgets-running",
        "an RMS that begins to lead adopts none of the workloads running in its region, "
        "so their ends are never reported and they stay RUNNING",
        "shallow",
        "no-lost-workload",
        _rms_failover_while_running,
        chaos_caught=38,
        chaos_first_seed=1,
    ),
    # ---- medium: some seeds (a fault must hit the right kind of job) ------------------------
    ZooBug(
        "cm-restart-from-zero",
        "a CM restarts a job moved off a failed machine from scratch, not its checkpoint",
        "medium",
        "progress",
        _machine_fails,
        chaos_caught=19,
        chaos_first_seed=3,
    ),
    ZooBug(
        "rms-reports-failed-as-done",
        "an RMS reports a workload whose gang lost a job to a failure as done",
        "medium",
        "no-lost-workload",
        _machine_fails_no_spare,
        chaos_caught=17,
        chaos_first_seed=2,
    ),
    ZooBug(
        "migration-cap-per-attempt",
        "the migration service counts the daily cap per attempt of a copy: what a copy "
        "moved before a partition cut it off is forgotten once it resumes",
        "medium",
        "migration-cap",
        _wan_partition,
        chaos_caught=0,
        chaos_first_seed=None,
        family="wan-partition-migration",
        family_overrides=(("faults", []), ("nemesis", _NEMESIS)),
        family_caught=15,
    ),
    # ---- deep: a fault must land inside a protocol window --------------------------------
    ZooBug(
        "cm-takeover-frees-checkpointing",
        "a CM that takes over while a victim saves its checkpoint frees the victim's "
        "machines at once",
        "deep",
        "preemption",
        _takeover_mid_checkpoint,
        chaos_caught=1,
        chaos_first_seed=34,
    ),
    ZooBug(
        "gms-reauctions-dispatching",
        "a new GMS leader queues again the workloads still DISPATCHING, so they are "
        "auctioned twice",
        "deep",
        "gang",
        _gms_failover_mid_dispatch,
        chaos_caught=1,
        chaos_first_seed=40,
    ),
    ZooBug(
        "rms-takeover-adopts-partial-dispatch",
        "an RMS that takes over a dispatch half started (some jobs hold machines, others "
        "wait for victims) reports it started instead of rolling it back",
        "deep",
        "gang",
        _rms_failover_mid_dispatch,
        chaos_caught=0,
        chaos_first_seed=None,
    ),
    ZooBug(
        "gms-region-lost-ignores-cms",
        "the GMS gives a region up as dark when only its RMS is, though its CMs lead",
        "deep",
        "auction",
        _rms_dark,
        chaos_caught=0,
        chaos_first_seed=None,
    ),
    ZooBug(
        "lease-renews-at-expiry",
        "the store counts a lease valid at the instant it expires, so a leader back "
        "from a pause at exactly that instant renews a lease the database keeps "
        "expired (store/leases.py): its fenced writes fail and no follower takes over",
        "deep",
        "lease-safety",
        _pause_to_expiry,
        chaos_caught=0,
        chaos_first_seed=None,
    ),
    ZooBug(
        "gms-award-forgets-epoch",
        "the awards of a pipelined batch are written without the GMS lease in their "
        "condition, so a leader whose lease lapsed while their bids came in (paused) "
        "still awards",
        "deep",
        "auction",
        _gms_paused_in_pipelined_batch,
        chaos_caught=0,
        chaos_first_seed=None,
        family_overrides=(("system.auction", {"pipeline": 4}),),
        family_caught=0,
    ),
    ZooBug(
        "rms-timeout-takes-old-attempt",
        "an RMS whose dispatch hears nothing from its CM takes a live job of the "
        "workload's given-up attempt in that cluster for the new attempt's start",
        "deep",
        "gang",
        _cm_darker_than_rms,
        chaos_caught=0,
        chaos_first_seed=None,
        # With its data replicated everywhere a workload given up goes to another region.
        family_overrides=(("system.data_placement", "home-only"),),
        family_caught=0,
    ),
)


def family(bug: ZooBug) -> dict[str, Any]:
    """The scenario whose random seeds measured the bug's depth, with `bugs = [NAME]`."""
    from emulator.registry import builtin_scenarios
    from emulator.run.overrides import set_path

    raw = tomllib.loads(builtin_scenarios()[bug.family].read_text(encoding="utf-8"))
    for path, value in bug.family_overrides:
        set_path(raw, path, value)
    raw["bugs"] = [bug.name]
    return raw


def witness(bug: ZooBug) -> dict[str, Any]:
    """The bug's witness scenario (without `bugs`: add it to see the violation)."""
    return _named(bug.name, bug.witness(), f"bug zoo witness of {bug.name}: {bug.description}")


def witness_path(name: str) -> Path:
    return WITNESS_DIR / f"{name}.json"


def witness_text(bug: ZooBug) -> str:
    return json.dumps(witness(bug), indent=1, sort_keys=True) + "\n"


def write_witnesses(folder: Path = WITNESS_DIR) -> list[Path]:
    """Write every witness as `folder/NAME.json`; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for bug in ZOO:
        path = folder / f"{bug.name}.json"
        path.write_text(witness_text(bug), encoding="utf-8")
        written.append(path)
    return written
