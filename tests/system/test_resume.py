"""`mastemu resume`: a run killed at any point goes on as if every actor had
crashed and restarted there, losing no submitted workload.

The runs are `quickstart` cut to one emulated hour. Kills are real SIGKILLs
that the emulator process sends itself at a chosen emulated instant
(`MASTEMU_KILL_AT`), so where a run dies does not depend on wall time; what
its database keeps is what it had committed by then. Most kills happen in a
forked child (no interpreter start-up to pay); one story runs `mastemu run`
and `mastemu resume` as fresh processes. Stories that need no kill end a run
with an exception instead (a `failed` run resumes like a killed one).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.common.client import Client, ClientParams
from actors.mast.report.reporter import MastReporter
from actors.mast.system import MastSystem
from emulator.cli import main as cli
from emulator.kernel import Kernel
from emulator.registry import builtin_scenarios, load_plugins, register_system
from emulator.run.events import named
from emulator.run.resume import resume
from emulator.run.runner import RunResult, execute, plan_run
from emulator.run.scenario import decode_scenario
from emulator.run.stopping import KILL_AT_ENV
from emulator.units import MIN, H
from store import Store
from store.mast.queue import STATES, in_states
from store.runs import RunMeta, get_run_meta, put_run_meta
from store.trace import TraceRow, iter_trace
from tests.support.trace import store_events

Queue = dict[str, str]


def one_hour(folder: Path, extra: str = "", kind: str = "mast") -> Path:
    """`quickstart` cut to one emulated hour, with `extra` TOML appended."""
    text = builtin_scenarios()["quickstart"].read_text(encoding="utf-8")
    assert 'duration = "6h"\n' in text and 'kind = "mast"\n' in text
    text = text.replace('duration = "6h"\n', 'duration = "1h"\n', 1)
    text = text.replace('kind = "mast"\n', f'kind = "{kind}"\n', 1)
    path = folder / f"quickstart-1h-{kind}.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


# ---- killing and reading runs ----------------------------------------------------------
def _main_killed_at(argv: list[str], kill_at: str) -> None:
    os.environ[KILL_AT_ENV] = kill_at
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        cli.main(argv)


def kill_in_child(argv: list[str], kill_at: str) -> None:
    """`mastemu ARGV` in a forked child that SIGKILLs itself at emulated `kill_at`."""
    child = multiprocessing.get_context("fork").Process(
        target=_main_killed_at, args=([*argv, "--no-progress"], kill_at)
    )
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL


def kill_process(argv: list[str], kill_at: str) -> None:
    """`mastemu ARGV` as a new process that SIGKILLs itself at emulated `kill_at`."""
    script = Path(sys.executable).with_name("mastemu")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "emulator.cli.main"]
    proc = subprocess.run(
        [*command, *argv, "--no-progress"],
        capture_output=True,
        text=True,
        env={**os.environ, KILL_AT_ENV: kill_at},
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


async def _read(db: Path) -> tuple[RunMeta, Queue, list[TraceRow]]:
    async with Store.open_ctx(db) as store:
        meta = await get_run_meta(store)
        queue = {e.id: e.state for e in await in_states(store, STATES)}
        rows = [row async for row in iter_trace(store)]
    assert meta is not None
    return meta, queue, rows


def read(db: Path) -> tuple[RunMeta, Queue, list[TraceRow]]:
    """Run metadata, every workload's queue state, the whole trace."""
    return asyncio.run(_read(db))


def copy_db(src: Path, dst: Path) -> Path:
    """Copy a run database as a killed process left it (its WAL holds the commits)."""
    for suffix in ("", "-wal"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")
    return dst


def cli_main(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(argv))
    return code, out.getvalue()


def trace_hash(stdout: str) -> str:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("trace-hash: "), stdout
    return last.removeprefix("trace-hash: ")


def resumes(rows: list[TraceRow]) -> list[TraceRow]:
    return [r for r in rows if (r.kind, r.type) == ("run", "resume")]


class Boom(RuntimeError):
    """Ends a run in the middle (the run is `failed`, and resumable)."""


def run_until_boom(
    path: Path, db: Path, at_us: int, on_kernel: Callable[[Kernel], None] = lambda k: None
) -> None:
    """Run the scenario at `path` into `db` and make it fail at `at_us`."""
    text = path.read_text(encoding="utf-8")
    plan = plan_run(decode_scenario(text, str(path)), text, str(path))

    def boom() -> None:
        raise Boom

    def arm(kernel: Kernel) -> None:
        on_kernel(kernel)
        kernel.at(at_us, boom)

    with pytest.raises(Boom):
        asyncio.run(execute(plan, seed=1, out=db, on_kernel=arm))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume")


@pytest.fixture(scope="module")
def reference(folder: Path) -> Queue:
    """The final queue of the one-hour run without a kill."""
    db = folder / "reference.db"
    code, _ = cli_main("run", str(one_hour(folder)), "--out", str(db), "--no-progress")
    assert code == 0
    return read(db)[1]


@pytest.fixture(scope="module")
def killed(folder: Path) -> Iterator[Callable[[str, Path], Path]]:
    """`killed(T, dst)`: a copy at `dst` of the one-hour run killed at T (killed once per T)."""
    cache: dict[str, Path] = {}

    def get(kill_at: str, dst: Path) -> Path:
        if kill_at not in cache:
            db = folder / f"killed-{kill_at}.db"
            kill_in_child(["run", str(one_hour(folder)), "--out", str(db)], kill_at)
            cache[kill_at] = db
        return copy_db(cache[kill_at], dst)

    yield get


def unattended_jobs(db: Path, rows: list[TraceRow], resume_seq: int) -> list[str]:
    """Jobs that hold machines at the end though no agent of theirs started after the resume.

    Every agent died with the killed process: a job still live at the end
    must be an attempt whose agent started after the resume point, or it
    holds its machines for nobody.
    """
    with contextlib.closing(sqlite3.connect(db)) as conn:
        live = conn.execute(
            "SELECT workload_id, job, attempt FROM jobs "
            "WHERE state IN ('STARTING', 'RUNNING', 'CHECKPOINTING')"
        ).fetchall()
    started = {r.dst for r in rows if r.kind in ("start", "restart") and r.seq > resume_seq}
    agents = sorted(f"agent/{w}/{j}/{attempt}" for w, j, attempt in live)
    return [agent for agent in agents if agent not in started]


# ---- the promise: killed anywhere, nothing lost, every invariant holds -----------------
# Kill points: fixed ones, and ones drawn once from a fixed seed (to the second,
# so a kill lands between the scan's rounds too); more behind `slow`.
_DRAWN = [f"{s}s" for s in random.Random(20261123).sample(range(5 * 60, 58 * 60), 7)]
KILL_POINTS = ["10m", "25m", "45m", _DRAWN[0]]
MORE_KILL_POINTS = [pytest.param(k, marks=pytest.mark.slow) for k in _DRAWN[1:]]


@pytest.mark.parametrize("kill_at", KILL_POINTS + MORE_KILL_POINTS)
def test_a_run_killed_at_any_point_resumes_to_its_end_losing_no_workload(
    tmp_path: Path, killed: Callable[[str, Path], Path], reference: Queue, kill_at: str
) -> None:
    db = killed(kill_at, tmp_path / "run.db")
    meta, before, rows_before = read(db)
    assert meta.status == "running"
    assert before, "nothing was submitted before the kill"
    resume_t_us = rows_before[-1].t_us

    code, out = cli_main("resume", str(db), "--no-progress")

    assert code == 0, out
    meta, after, rows = read(db)
    assert (meta.status, meta.end_t_us) == ("ok", H)
    # Every workload submitted before the kill is still in the queue, and every
    # workload due by the end was submitted, as in the run that was not killed.
    assert before.keys() <= after.keys()
    assert after.keys() == reference.keys()
    # One trace: the stored events, the resume point, the continuation, the end.
    assert rows[: len(rows_before)] == rows_before
    (mark,) = resumes(rows)
    assert (mark.seq, mark.t_us) == (len(rows_before) + 1, resume_t_us)
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert (rows[-1].kind, rows[-1].type, rows[-1].t_us) == ("run", "end", H)
    assert meta.trace_hash == trace_hash(out)
    code, report = cli_main("check", str(db))
    assert code == 0, report
    # No job holds machines for an agent that died with the process.
    assert unattended_jobs(db, rows, mark.seq) == []


def test_resuming_the_same_killed_database_twice_gives_the_same_trace(
    tmp_path: Path, killed: Callable[[str, Path], Path]
) -> None:
    hashes = []
    for name in ("a", "b"):
        code, out = cli_main("resume", str(killed("25m", tmp_path / f"{name}.db")), "--no-progress")
        assert code == 0, out
        hashes.append(trace_hash(out))
    assert hashes[0] == hashes[1]


def test_a_resumed_run_killed_again_resumes_again(tmp_path: Path, reference: Queue) -> None:
    db = tmp_path / "run.db"
    kill_process(["run", str(one_hour(tmp_path)), "--out", str(db)], "20m")
    kill_process(["resume", str(db)], "40m")
    code, out = cli_main("resume", str(db), "--no-progress")
    assert code == 0, out
    meta, queue, rows = read(db)
    assert (meta.status, meta.end_t_us) == ("ok", H)
    assert queue.keys() == reference.keys()
    first, second = resumes(rows)
    assert first.t_us <= 20 * MIN < second.t_us <= 40 * MIN
    # Each kill ends one incarnation of every actor that was up.
    gms = [
        (r.kind, named(r).incarnation)
        for r in rows
        if r.dst == "gms/0" and r.kind.endswith("start")
    ]
    assert gms == [("start", 0), ("restart", 1), ("restart", 2)]
    code, report = cli_main("check", str(db))
    assert code == 0, report


# ---- job agents die with the process (see the module docstring of resume.py) -----------
def scripted(folder: Path, *workloads: dict[str, Any], duration: str) -> Path:
    """A MAST scenario file: one region of four 8-GPU machines, tenants `hi` and `lo`."""
    raw = {
        "name": "scripted",
        "duration": duration,
        "system": {
            "kind": "mast",
            "world_model": {
                "regions": [
                    {
                        "name": "east",
                        "gpu_machines": {"A100": 4},
                        "cpu_machines": 0,
                        "datacenters": 1,
                        "fault_domains": 1,
                        "machines_per_rack": 4,
                    }
                ],
                "clusters_per_region": 1,
            },
            "tenant_list": [
                {"name": "hi", "priority": 1, "gpu_quota": 1000, "cpu_quota": 1000},
                {"name": "lo", "priority": 5, "gpu_quota": 1000, "cpu_quota": 1000},
            ],
            "workload_list": list(workloads),
            "table_list": [{"name": "t", "size_bytes": 1, "home_region": "east"}],
            "data_placement": "home-only",
            "scan_interval": "1m",
        },
        "invariants": {"enabled": ["allocation", "gang", "preemption", "no-lost-workload"]},
    }
    path = folder / "scripted.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def gpu_workload(wid: str, tenant: str, at_us: int, gpus: int, work_us: int) -> dict[str, Any]:
    job = {
        "name": "trainer",
        "role": "trainer",
        "gpu_type": "A100",
        "gpus": gpus,
        "work_us": work_us,
        "checkpoint_every_us": 20 * MIN,
        "input_tables": ["t"],
    }
    return {"id": wid, "tenant": tenant, "submit_at_us": at_us, "jobs": [job]}


def test_a_job_whose_agent_died_with_the_process_restarts_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    # J (50 min of work) runs from the start and saves a checkpoint every 20
    # min; the process dies at 30 min. Its CM, restarted, hears nothing from
    # J's agent and starts J again from the 20-min checkpoint.
    path = scripted(tmp_path, gpu_workload("J", "lo", 0, 32, 50 * MIN), duration="2h")
    db = tmp_path / "run.db"
    run_until_boom(path, db, 30 * MIN)
    result = asyncio.run(resume(db))
    assert isinstance(result, RunResult) and result.violations == []
    _, queue, rows = read(db)
    assert queue == {"J": "DONE"}
    lost = [r for r in rows if r.type == "cm.agent-lost"]
    moved = [r for r in rows if r.type == "cm.job-moved"]
    assert [(r.t_us > 30 * MIN, r.payload["attempt"]) for r in lost] == [(True, 1)]
    assert [(r.payload["attempt"], r.payload["from_us"]) for r in moved] == [(2, 20 * MIN)]
    # Found within the CM's probing (3 probes 5 s apart), not after minutes.
    assert lost[0].t_us - 30 * MIN <= 20_000_000


def test_a_victim_whose_agent_died_with_the_process_breaks_no_invariant(tmp_path: Path) -> None:
    # L fills the region from the start; the process dies at 30 min; at 1 h
    # H (higher priority) needs half of L's GPUs.
    path = scripted(
        tmp_path,
        gpu_workload("L", "lo", 0, 32, 3 * H),
        gpu_workload("H", "hi", 60 * MIN, 16, 20 * MIN),
        duration="2h",
    )
    db = tmp_path / "run.db"
    run_until_boom(path, db, 30 * MIN)
    result = asyncio.run(resume(db))
    assert isinstance(result, RunResult)
    assert result.violations == []
    _, queue, rows = read(db)
    assert queue == {"H": "DONE", "L": "RUNNING"}
    # L's agent was found dead and L restarted long before H came: L saved
    # its checkpoint and let H in at once, not after the CM's 5-min stop timeout.
    h_start = store_events(rows, "fleet.start", "H")[0]
    assert h_start.t_us < 62 * MIN


def test_a_victim_killed_while_saving_its_checkpoint_is_released_without_a_violation(
    tmp_path: Path,
) -> None:
    # As above, but the process dies while L saves the checkpoint H's plan asked
    # for (H is awarded at 60 min 10 s; the checkpoint takes 30 s): L's agent
    # dies before it, L is released with its older checkpoint, and H starts.
    path = scripted(
        tmp_path,
        gpu_workload("L", "lo", 0, 32, 3 * H),
        gpu_workload("H", "hi", 60 * MIN, 16, 20 * MIN),
        duration="2h",
    )
    db = tmp_path / "run.db"
    kill_us = 60 * MIN + 20_000_000
    run_until_boom(path, db, kill_us)
    saving = [e for e in store_events(read(db)[2], "fleet.state") if e.result]
    assert saving[-1].state == "CHECKPOINTING", "L was not saving at the kill"

    result = asyncio.run(resume(db))

    assert isinstance(result, RunResult)
    assert result.violations == []
    _, queue, rows = read(db)
    assert queue == {"H": "DONE", "L": "RUNNING"}
    (lost,) = [r.payload for r in rows if r.type == "cm.agent-lost"]
    assert lost == {"workload": "L", "job": "trainer", "attempt": 1}
    # H did not wait for the RMS's 15-min dispatch timeout.
    h_start = store_events(rows, "fleet.start", "H")[0]
    assert h_start.t_us - kill_us < 2 * MIN
    code, report = cli_main("check", str(db))
    assert code == 0, report


# ---- why a killed run's database is consistent ------------------------------------------
async def test_group_commit_makes_writes_durable_only_with_their_commit(tmp_path: Path) -> None:
    db = tmp_path / "group.db"

    def durable() -> list[str]:
        # What a process opening the file after a kill would find.
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return [k for (k,) in conn.execute("SELECT key FROM kv ORDER BY key")]

    async with Store.open_ctx(db) as store:
        await store.begin_group()
        await store.write("INSERT INTO kv VALUES ('ns', 'a', x'01')")
        with pytest.raises(sqlite3.IntegrityError):
            async with store.transaction() as conn:
                await conn.execute("INSERT INTO kv VALUES ('ns', 'b', x'01')")
                await conn.execute("INSERT INTO kv VALUES ('ns', 'a', x'02')")
        # The failed transaction is undone on its own; the group goes on.
        assert await store.fetchall("SELECT key FROM kv") == [("a",)]
        assert durable() == []
        await store.commit_group()
        assert durable() == ["a"]
        await store.write("INSERT INTO kv VALUES ('ns', 'c', x'01')")
    # Closed without committing, as a killed process never does: `c` is gone.
    assert durable() == ["a"]


# ---- what resume rebuilds ---------------------------------------------------------------
FAULTS = """
[[faults]]
action = "partition"
at = "10m"
regions = ["us-east", "eu-west"]
duration = "30m"

[[faults]]
action = "down"
at = "12m"
node = "ap-south/dc0/fd0/r0/m0"
duration = "30m"

[[faults]]
action = "loss"
at = "14m"
between = ["us-east", "ap-south"]
probability = 0.5
duration = "30m"

[[faults]]
action = "crash"
at = "16m"
target = "leader of gms"
restart_after = "1m"
"""


def network_state(kernel: Kernel) -> tuple[Any, ...]:
    net = kernel.network
    rules = [(r.rule_id, r.pair, r.loss) for r in net.rules]
    return (sorted(net.partitions), sorted(net.down), rules)


def test_fault_windows_open_at_the_resume_point_stay_open_and_end_on_time(
    tmp_path: Path,
) -> None:
    path = one_hour(tmp_path, FAULTS)
    seen: dict[str, tuple[Any, ...]] = {}

    def snapshot_at_20m(kernel: Kernel) -> None:
        kernel.at(20 * MIN, lambda: seen.setdefault("uninterrupted", network_state(kernel)))

    run_until_boom(path, tmp_path / "clean.db", 21 * MIN, on_kernel=snapshot_at_20m)
    db = tmp_path / "run.db"
    run_until_boom(path, db, 20 * MIN)

    def snapshot_now(kernel: Kernel) -> None:
        seen["resumed"] = network_state(kernel)

    result = asyncio.run(resume(db, on_kernel=snapshot_now))

    assert isinstance(result, RunResult) and result.status == "ok", result
    assert seen["resumed"] == seen["uninterrupted"]
    partitions, down, rules = seen["resumed"]
    assert partitions and down == ["ap-south/dc0/fd0/r0/m0"] and len(rules) == 1
    _, _, rows = read(db)
    (mark,) = resumes(rows)
    after = [(r.t_us, r.type, r.dst) for r in rows if r.kind == "fault" and r.seq > mark.seq]
    # The windows end as scheduled; nothing that began before the resume begins again.
    assert after == [
        (40 * MIN, "partition.end", ""),
        (42 * MIN, "up", "ap-south/dc0/fd0/r0/m0"),
        (44 * MIN, "loss.end", ""),
    ]


ACTOR_FAULTS = """
[[faults]]
action = "pause"
at = "15m"
target = "leader of gms"
duration = "10m"

[[faults]]
action = "slow-store"
at = "16m"
target = "leader of cm/us-east/c0"
duration = "10m"
latency = "5s"

[[faults]]
action = "crash"
at = "17m"
target = "rms/us-east/1"
restart_after = "10m"

[[faults]]
action = "crash"
at = "18m"
target = "rms/eu-west/1"
"""


def run_whole(path: Path, db: Path) -> RunResult:
    """The run of the scenario at `path` that nothing interrupts."""
    text = path.read_text(encoding="utf-8")
    plan = plan_run(decode_scenario(text, str(path)), text, str(path))
    return asyncio.run(execute(plan, seed=1, out=db))


def report_windows(db: Path) -> list[list[Any]]:
    """The fault windows `mastemu report` shades: [start_s, end_s, action]."""
    windows: list[list[Any]] = asyncio.run(MastReporter().report(db))["fault_windows"]
    return windows


def resume_twice(db: Path) -> RunResult:
    """Resume `db` and a copy of it; both give one trace hash. Returns the first."""
    twin = copy_db(db, db.with_name("twin.db"))
    result, again = asyncio.run(resume(db)), asyncio.run(resume(twin))
    assert isinstance(result, RunResult) and isinstance(again, RunResult)
    assert result.trace_hash == again.trace_hash
    return result


def test_a_pause_a_slow_store_and_crashes_open_at_the_resume_point_last_their_whole_window(
    tmp_path: Path,
) -> None:
    # At the kill (20 min) the GMS leader is paused until 25 min, the CM
    # leader's store is slow until 26 min, rms/us-east/1 is down until 27 min
    # and rms/eu-west/1 is down for good.
    path = one_hour(tmp_path, ACTOR_FAULTS)
    whole = run_whole(path, tmp_path / "whole.db")
    db = tmp_path / "run.db"
    run_until_boom(path, db, 20 * MIN)

    result = resume_twice(db)

    assert result.status == "ok" and result.violations == []
    _, _, rows = read(db)
    (mark,) = resumes(rows)
    held = {"gms/0": 25 * MIN, "rms/us-east/1": 27 * MIN, "rms/eu-west/1": None}
    assert mark.payload["held"] == held
    # The frozen leader does nothing until its pause ends, then comes back;
    # the crashed RMS comes back when its restart was due, the other never.
    after = [r for r in rows if r.seq > mark.seq]
    assert not [r for r in after if r.src == "gms/0" and r.t_us < 25 * MIN]
    back = [(r.dst, r.t_us) for r in after if r.kind == "restart" and r.dst in held]
    assert back == [("gms/0", 25 * MIN), ("rms/us-east/1", 27 * MIN)]
    # The slow store answers late until its window ends, and only until then.
    slow = [r.t_us for r in after if r.kind == "slow-store" and r.src == "cm/us-east/c0/0"]
    assert slow and max(slow) < 26 * MIN
    # One window each, ending as in the run that was not killed: the same
    # `end` events, no second `start`, the same windows in the report.
    _, _, whole_rows = read(tmp_path / "whole.db")

    def faults_after_20m(some: list[TraceRow]) -> list[tuple[int, str, Any]]:
        return [
            (r.t_us, r.type, r.payload) for r in some if r.kind == "fault" and r.t_us > 20 * MIN
        ]

    assert faults_after_20m(after) == faults_after_20m(whole_rows)
    assert [t for t, *_ in faults_after_20m(after)] == [25 * MIN, 26 * MIN, 27 * MIN]
    assert report_windows(db) == report_windows(tmp_path / "whole.db")
    assert sorted(result.fault_windows) == sorted(whole.fault_windows)
    code, report = cli_main("check", str(db))
    assert code == 0, report


NEMESIS = """
[nemesis]
enabled = true
start = "1m"
interval_mean = "90s"
duration_mean = "8m"
heal_at = "45m"
actions = ["crash", "pause", "slow-store", "partition", "loss", "duplicate", "delay", "down"]
"""


@pytest.fixture(scope="module")
def nemesis_run(folder: Path) -> tuple[Path, Path]:
    """The one-hour run under a busy nemesis, uninterrupted: (scenario, database)."""
    sub = folder / "nemesis"
    sub.mkdir()
    path = one_hour(sub, NEMESIS)
    db = sub / "whole.db"
    assert run_whole(path, db).status == "ok"
    return path, db


@pytest.mark.parametrize("kill_at_min", [20, 36, pytest.param(7, marks=pytest.mark.slow)])
def test_nemesis_windows_open_at_the_resume_point_end_as_in_the_run_never_killed(
    tmp_path: Path, nemesis_run: tuple[Path, Path], kill_at_min: int
) -> None:
    # The nemesis draws its schedule from the seed alone, so the resumed run
    # has the killed run's faults; each window begun before the kill is
    # shaded from its start to its scheduled end, pause and slow store included.
    path, whole = nemesis_run
    db = tmp_path / "run.db"
    run_until_boom(path, db, kill_at_min * MIN)
    resume_t_us = read(db)[2][-1].t_us

    result = resume_twice(db)

    assert result.status == "ok" and result.violations == []
    began = [w for w in report_windows(whole) if w[0] * 1_000_000 <= resume_t_us]
    still_open = [w for w in began if w[1] * 1_000_000 > resume_t_us]
    assert len(still_open) >= 2, "the nemesis left no window open at the kill"
    assert [w for w in report_windows(db) if w[0] * 1_000_000 <= resume_t_us] == began
    code, report = cli_main("check", str(db))
    assert code == 0, report


class AmnesiacClient(Client):
    """Submits nothing more after a restart: what was still to come is lost."""

    async def on_start(self) -> None:
        await super().on_start()
        if self.restarted:
            self.todo = []


class AmnesiacSystem(MastSystem):
    """MAST with a client that does not rebuild its plan on restart."""

    def build(self, params: Any, seed: int, duration_us: int, base_dir: Path = Path()) -> Any:
        build = super().build(params, seed, duration_us, base_dir)
        _, _, workloads, _ = self.generate(params, seed, duration_us, base_dir)
        client = ClientParams(workloads=tuple(workloads))
        build.actors = [
            (a, h, t, (lambda: AmnesiacClient("client", client)) if a == "client" else f)
            for a, h, t, f in build.actors
        ]
        return build


def test_a_client_that_forgets_its_workloads_on_restart_is_caught(
    tmp_path: Path, reference: Queue
) -> None:
    load_plugins()
    register_system(AmnesiacSystem("mast-amnesiac-client"))
    db = tmp_path / "run.db"
    run_until_boom(one_hour(tmp_path, kind="mast-amnesiac-client"), db, 30 * MIN)
    before = read(db)[1]
    assert isinstance(asyncio.run(resume(db)), RunResult)
    after = read(db)[1]
    # What the run had submitted stays; what fell due after the resume never came.
    assert before.keys() <= after.keys()
    lost = reference.keys() - after.keys()
    assert lost and not lost & before.keys()


def test_a_run_killed_before_its_first_commit_starts_over(tmp_path: Path) -> None:
    # Only the run's metadata is durable: the scenario and the seed, no event.
    text = one_hour(tmp_path).read_text(encoding="utf-8")
    db = tmp_path / "run.db"

    async def started_run() -> None:
        async with Store.open_ctx(db) as store:
            await put_run_meta(
                store, RunMeta(scenario_name="quickstart", scenario_text=text, seed=1)
            )

    asyncio.run(started_run())
    result = asyncio.run(resume(db, until_us=5 * MIN))
    assert isinstance(result, RunResult) and (result.status, result.end_t_us) == ("ok", 5 * MIN)
    _, queue, rows = read(db)
    assert (rows[0].kind, rows[0].type) == ("run", "start") and not resumes(rows)
    assert queue


# ---- the command's edges ------------------------------------------------------------------
def test_a_finished_run_is_left_as_it_is(tmp_path: Path, folder: Path, reference: Queue) -> None:
    db = copy_db(folder / "reference.db", tmp_path / "done.db")
    before = read(db)
    code, out = cli_main("resume", str(db))
    assert code == 0
    assert "the run already finished (ok at 1h" in out and "nothing to resume" in out
    assert read(db) == before


def _foreign(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE notes (x)")


def _no_run(path: Path) -> None:
    async def create() -> None:
        await (await Store.open(path)).close()

    asyncio.run(create())


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no such run database"),
        (lambda p: p.write_text("hello"), "not an SQLite database"),
        (lambda p: p.write_bytes(b""), "empty file: not a mastemu run database"),
        (_foreign, "not a mastemu run database"),
        (_no_run, "no run metadata: not a run database"),
    ],
    ids=["missing", "text", "empty", "foreign", "no-run"],
)
def test_resume_of_something_that_is_not_a_run_exits_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], None], message: str
) -> None:
    path = tmp_path / "thing.db"
    make(path)
    assert cli.main(["resume", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and message in err
    assert "Traceback" not in err
