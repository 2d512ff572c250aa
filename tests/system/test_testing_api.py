"""The public testing API (`emulator.testing`) and its pytest plugin, as a user's suite sees them.

The fixture `mastemu` below is the plugin's, installed with mastemu (no
conftest provides it). The deliberately broken GMS of `tests/support/broken.py`
gives the failing runs the assertions must explain.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from actors.mast.scripted import job, preemption_story, scenario, workload
from emulator.errors import InputError
from emulator.registry import builtin_scenarios
from emulator.testing import (
    MastemuFixture,
    assert_clean,
    assert_eventually,
    assert_never,
    run_scenario,
)
from emulator.units import MIN, S
from tests.support.broken import DoubleAwardGMS, broken_system
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]


# ---- what can be run --------------------------------------------------------------------------
def test_a_builtin_its_file_and_its_text_run_the_same(tmp_path: Path) -> None:
    path = builtin_scenarios()["leader-lease"]
    by_name = run_scenario("leader-lease", until="30m", out_dir=tmp_path)
    by_path = run_scenario(path, until="30m", out_dir=tmp_path)
    by_text = run_scenario(path.read_text(), until=30 * MIN, out_dir=tmp_path)
    assert by_name.status == "ok"
    assert by_name.trace_hash == by_path.trace_hash == by_text.trace_hash
    assert by_name.reproduce == "mastemu run leader-lease --seed 1 --until 30m"
    assert by_path.reproduce == f"mastemu run {path} --seed 1 --until 30m"
    # A text has no file: what ran is written beside its database and reproduced from there.
    shown = Path(by_text.reproduce.split()[2])
    assert shown.parent == tmp_path and json.loads(shown.read_text())["name"] == "leader-lease"


def test_overrides_set_keys_by_dotted_path_and_bad_ones_name_the_path(
    mastemu: MastemuFixture, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = mastemu.run("leader-lease", seed=3, until="20m", **{"actors[0].params.lease_ttl": "12s"})
    assert run.seed == 3 and run.result.end_t_us <= 20 * MIN
    started = {e.dst for e in run.events(kind="start")}
    assert {"demo/us-east", "demo/eu-west"} <= started
    # The command it names runs exactly what ran, overrides included (`run --set`).
    assert run.reproduce == (
        "mastemu run leader-lease --set 'actors[0].params.lease_ttl=\"12s\"' --seed 3 --until 20m"
    )
    argv = [*shlex.split(run.reproduce)[2:], "--out", str(tmp_path / "again.db")]
    code, out, _ = run_cli(capsys, "run", *argv)
    assert code == 0 and run.trace_hash in out
    with pytest.raises(InputError) as bad:
        mastemu.run("leader-lease", **{"actors[9].host": "x"})
    assert "actors[9].host" in str(bad.value)
    with pytest.raises(InputError) as unknown:
        mastemu.run("leader-lease", **{"network.no_such_key": 1})
    assert "no_such_key" in str(unknown.value)


def test_events_are_filtered_and_read_by_name(mastemu: MastemuFixture) -> None:
    run = mastemu.run(preemption_story(duration="6h"))
    assert_clean(run)
    submits = list(run.events(kind="store", type="queue.submit"))
    assert [e.spec["id"] for e in submits] == ["L", "H"]
    dispatches = list(run.events(kind="decision", type="rms.dispatch", src="rms/"))
    assert {d.workload for d in dispatches} == {"L", "H"}
    (victims,) = [d for d in dispatches if d.victims]
    assert victims.workload == "H" and victims.victims == [["L", "trainer"]]
    late = list(run.events(type="rms.dispatch", since=30 * MIN, until=90 * MIN))
    assert [d.workload for d in late] == ["H"]
    assert all(e.dst == "rms/east" for e in run.events(kind="deliver", dst="rms/east"))
    tables = run.state_at()
    assert {w["id"]: w["state"] for w in tables["workloads"]} == {"L": "DONE", "H": "DONE"}
    # Any instant before the end: the trace folded to it (issue 18).
    early = run.state_at(10 * MIN)
    assert {w["id"]: w["state"] for w in early["workloads"]} == {"L": "RUNNING"}


def test_report_is_the_one_report_json_prints(
    mastemu: MastemuFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    run = mastemu.run(preemption_story(duration="6h"))
    code, out, _ = run_cli(capsys, "report", str(run.db), "--json")
    assert code == 0 and json.loads(out) == json.loads(json.dumps(run.report()))


# ---- assertions that explain ------------------------------------------------------------------
def test_assert_clean_shows_the_violation_the_trace_around_it_and_the_command(
    mastemu: MastemuFixture,
) -> None:
    kind = broken_system("mast-double-award", gms=DoubleAwardGMS)
    run = mastemu.run(scenario([workload("W", "hi", 0, job(gpus=8))], kind=kind, duration="20m"))
    assert run.violations and run.violations[0].invariant == "auction"
    with pytest.raises(AssertionError) as failed:
        assert_clean(run)
    text = str(failed.value)
    first = run.violations[0]
    assert f"VIOLATION auction at #{first.seq}" in text
    assert f">> #{first.seq} " in text  # the failing event, marked, among its neighbours
    assert text.count("\n   #") >= 3
    assert f"reproduce: {run.reproduce}" in text
    code, printed = run.check()
    assert code == 1 and "VIOLATION auction" in printed


def test_assert_eventually_and_never(mastemu: MastemuFixture) -> None:
    run = mastemu.run(preemption_story(duration="6h"))
    first_h = assert_eventually(run, lambda e: e.type == "rms.dispatch" and e.workload == "H")
    assert first_h.t_us >= 60 * MIN
    with pytest.raises(AssertionError, match=r"within 30.000s .*\ntrace at 30.000s:\n"):
        assert_eventually(
            run, lambda e: e.type == "rms.dispatch" and e.workload == "H", within=30 * S
        )
    assert_never(run, lambda e: e.kind == "crash")
    with pytest.raises(AssertionError) as seen:
        assert_never(run, lambda e: e.type == "rms.dispatch" and bool(e.victims))
    assert f"event #{first_h.seq} at" in str(seen.value)  # H's dispatch is the one with victims
    assert f">> #{first_h.seq} " in str(seen.value)
    assert "reproduce: mastemu run" in str(seen.value)


# ---- the plugin in a pytest run of its own ------------------------------------------------------
def _pytest(
    folder: Path, *args: str, extra_path: Path | None = None
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mastemu_seeds_names_the_failing_seed_and_its_command(tmp_path: Path) -> None:
    (tmp_path / "test_seeds.py").write_text(
        textwrap.dedent(
            """
            import pytest

            @pytest.mark.mastemu_seeds(1, 3)
            def test_lease(mastemu):
                run = mastemu.run("leader-lease", until="10m")
                assert run.seed != 2, "seed 2 is the bad one"
            """
        )
    )
    done = _pytest(tmp_path, "test_seeds.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "2 passed" in done.stdout and "1 failed" in done.stdout
    assert "FAILED test_seeds.py::test_lease[seed2]" in done.stdout
    assert "seed 2" in done.stdout
    assert "reproduce: mastemu run leader-lease --seed 2 --until 10m" in done.stdout
    assert "--seed 1" not in done.stdout and "--seed 3" not in done.stdout


def test_the_example_user_suite_installs_and_passes(tmp_path: Path) -> None:
    # A copy, so that building it leaves nothing in the checkout.
    example = tmp_path / "user-suite"
    shutil.copytree(REPO / "examples" / "user-suite", example)
    site = tmp_path / "site"
    pip = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"),
            *("--target", str(site), str(example)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    shutil.rmtree(example / "smallest_first")  # the tests must use what was installed
    done = _pytest(example, extra_path=site)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout


def test_the_readme_example_runs(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Testing your own scheduler with mastemu") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    assert "mastemu_seeds(1, 20)" in code
    (tmp_path / "test_readme.py").write_text(
        code.replace("mastemu_seeds(1, 20)", "mastemu_seeds(1, 2)")
    )
    done = _pytest(tmp_path, "test_readme.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
