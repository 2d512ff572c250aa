"""explore: a guided search of fault schedules, deterministic in runs, that finds and shrinks.

The bug used here is `UnfencedCandidate` (tests/support/broken.py): a lease
holder whose writes are not fenced. Its scenario starts with no faults at
all, so only a schedule the search builds (a pause or a crash of the
leader, long enough for the lease to pass) can expose it; random seeds of
the same scenario change only the network's jitter and never do.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from emulator.registry import builtin_scenarios, load_plugins, register_actor
from emulator.run.explore import Budget, explore, parse_budget, run_schedule
from emulator.run.pools import ClusterSpec
from emulator.run.runner import plan_run
from emulator.run.scenario import parse_raw, resolve_scenario
from emulator.run.shrink import materialise
from emulator.run.sweep import sweep
from tests.support.broken import UnfencedCandidate
from tests.support.cli import run_cli

load_plugins()


@pytest.fixture
def unfenced(tmp_path: Path) -> Path:
    """The lease demo with unfenced candidates and none of its faults."""
    register_actor(UnfencedCandidate)  # sweep's workers are forked: they inherit it
    text = builtin_scenarios()["leader-lease"].read_text()
    raw = tomllib.loads(text.replace('"lease-candidate"', f'"{UnfencedCandidate.kind}"'))
    raw["faults"] = []
    raw["duration"] = "90m"  # leases renew every 3 s: a shorter run is a cheaper one
    path = tmp_path / "unfenced.json"
    path.write_text(json.dumps(raw))
    return path


def test_the_search_finds_what_random_seeds_do_not_and_writes_a_minimal_reproducer(
    unfenced: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    random = sweep(str(unfenced), range(1, 21), jobs=2, keep_dir=tmp_path / "kept")
    assert not any(r.failed for r in random.runs)  # 20 random seeds: all clean
    result = explore(
        str(unfenced), seed=1, budget=Budget(runs=150), out_dir=tmp_path / "ex", stop_at_first=True
    )
    (failure,) = result.failures
    assert failure.signature[0] == "lease-safety"
    assert failure.minimal is not None
    # The reproducer is a scenario of its own: a few faults, and it fails as written.
    minimal = tomllib.loads(Path(failure.minimal).read_text())
    assert 1 <= len(minimal["faults"]) <= 2
    code, out, _ = run_cli(
        capsys, "run", failure.minimal, "--out", str(tmp_path / "again.db")
    )  # fmt: skip
    assert code == 1 and "lease-safety" in out


def test_a_budget_in_runs_gives_the_same_search_every_time(unfenced: Path, tmp_path: Path) -> None:
    def search(seed: int, folder: str) -> tuple[object, ...]:
        out = explore(str(unfenced), seed=seed, budget=Budget(runs=8), out_dir=tmp_path / folder)
        runs = [(r.mutation, r.seed, r.faults, r.new, r.status) for r in out.runs]
        return runs, out.features_over_time, out.corpus

    first = search(7, "a")
    assert first == search(7, "b")
    assert first[0] != search(8, "c")[0]  # the search's own seed steers it


def test_the_corpus_grows_and_faults_are_seen_in_the_phase_they_hit(tmp_path: Path) -> None:
    result = explore("gms-failover", seed=3, budget=Budget(runs=5), out_dir=tmp_path / "ex")
    grown = result.features_over_time
    assert grown == sorted(grown) and grown[-1] > grown[0]
    assert result.corpus >= 2 and not result.failures
    # gms-failover crashes the GMS leader in the middle of an auction (its description).
    scenario, text, source = resolve_scenario("gms-failover")
    schedule = materialise(plan_run(scenario, text, source), scenario.seed)
    outcome = run_schedule(
        parse_raw(text, source), schedule.heal_at_us, 1, tuple(schedule.faults), tmp_path / "r.db"
    )
    assert outcome.status == "ok" and "F:crash@auction" in outcome.signature
    assert "S:gms-failover-mid-auction" in outcome.signature
    assert outcome.counts["gms-failover-mid-auction"] == 1


def test_batches_run_in_processes_or_on_dask_give_one_search(
    unfenced: Path, tmp_path: Path
) -> None:
    pytest.importorskip("distributed")

    def search(folder: str, **where: object) -> tuple[object, ...]:
        out = explore(
            str(unfenced), seed=5, budget=Budget(runs=8), out_dir=tmp_path / folder, **where
        )
        return [(r.mutation, r.seed, r.faults, r.new, r.status) for r in out.runs], out.corpus

    in_processes = search("p", jobs=2)
    assert in_processes == search("d", cluster=ClusterSpec(workers=2))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "runs must be between 1"),
        ("ten", "neither a number of runs nor a duration"),
        ("0s", "between 1s and 7 days"),
    ],
)
def test_a_bad_budget_exits_2(capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    code, out, err = run_cli(capsys, "explore", "chaos", "--budget", text)
    assert code == 2 and message in err and "Traceback" not in out + err
    with pytest.raises(Exception, match=message):
        parse_budget(text)


def test_the_command_prints_progress_and_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "ex"
    code, out, err = run_cli(
        capsys, "explore", "leader-lease", "--budget", "3", "--out", str(out_dir), "--json"
    )
    report = json.loads(out)
    assert code == 0 and report["runs"] == 3 and report["failures"] == []
    assert "explore: leader-lease  seed 1  budget 3 runs" in err
    assert set(report["sometimes"]) == {
        "leader-failover",
        "leader-lost-lease",
        "leader-back-at-expiry",
    }
    assert json.loads((out_dir / "explore.json").read_text()) == report
    # The folder is this search's: a second one into it needs --force.
    code, _, err = run_cli(
        capsys, "explore", "leader-lease", "--budget", "1", "--out", str(out_dir)
    )
    assert code == 2 and "--force" in err
