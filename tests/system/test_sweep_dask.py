"""sweep on Dask: the same seeds give the same hashes as local processes, failures come home.

A local Dask cluster (`--cluster local:N`) and a scheduler reached by its
address (`tcp://…`, here one this test starts) both run the seeds; a
failing run's database is shipped back from the worker and kept where a
local sweep keeps it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.registry import builtin_scenarios, load_plugins, register_actor
from emulator.run import pools
from emulator.run.pools import ClusterSpec, parse_cluster
from emulator.run.sweep import sweep
from tests.support.broken import UnfencedCandidate
from tests.support.cli import run_cli

distributed = pytest.importorskip("distributed", reason="the [cluster] extra is not installed")

load_plugins()

SEEDS = range(1, 5)


def hashes(cluster: ClusterSpec | None, tmp_path: Path, jobs: int = 2) -> list[str | None]:
    result = sweep("leader-lease", SEEDS, jobs=jobs, keep_dir=tmp_path, cluster=cluster)
    assert [r.status for r in result.runs] == ["ok"] * len(SEEDS)
    return [r.trace_hash for r in result.runs]


def test_a_local_dask_cluster_gives_the_hashes_of_local_processes(tmp_path: Path) -> None:
    local = hashes(None, tmp_path)
    assert hashes(ClusterSpec(workers=2), tmp_path) == local
    assert len(set(local)) == len(SEEDS)  # different seeds, different runs


def test_a_scheduler_reached_by_its_address_runs_the_seeds(tmp_path: Path) -> None:
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        dashboard_address=None,
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://")
        remote = hashes(parse_cluster(address), tmp_path, jobs=0)
    assert remote == hashes(None, tmp_path)


def test_a_failing_runs_database_is_shipped_back_and_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    register_actor(UnfencedCandidate)  # local:N workers are forked: they inherit it
    text = builtin_scenarios()["leader-lease"].read_text()
    scenario = tmp_path / "unfenced.toml"
    scenario.write_text(text.replace('"lease-candidate"', f'"{UnfencedCandidate.kind}"'))
    keep = tmp_path / "kept"
    code, out, _ = run_cli(
        capsys, "sweep", str(scenario), "--seeds", "1-2", "--cluster", "local:2", "--keep-dir",
        str(keep),
    )  # fmt: skip
    assert code == 1
    assert "on Dask local:2" in out
    assert "VIOLATION lease-safety" in out
    assert f"reproduce: mastemu run {scenario} --seed 2" in out
    for seed in (1, 2):
        kept = keep / f"leader-lease-{seed}.db"
        assert run_cli(capsys, "check", str(kept))[0] == 1, seed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("local:0", "local:N needs N between 1 and 1024"),
        ("local:x", "local:N needs N between 1 and 1024"),
        ("http://host:8786", "not `local`, `local:N` or a Dask scheduler address"),
        ("", "not `local`, `local:N` or a Dask scheduler address"),
    ],
)
def test_a_bad_cluster_exits_2(capsys: pytest.CaptureFixture[str], spec: str, message: str) -> None:
    code, out, err = run_cli(capsys, "sweep", "chaos", "--seeds", "1-2", "--cluster", spec)
    assert code == 2 and message in err and "Traceback" not in err + out


def test_an_unreachable_scheduler_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pools, "CONNECT_TIMEOUT_S", 1)
    address = "tcp://127.0.0.1:9"  # discard: nothing listens there
    code, out, err = run_cli(capsys, "sweep", "chaos", "--seeds", "1-2", "--cluster", address)
    assert code == 2, err
    assert f"cannot reach the Dask scheduler at {address}" in err
    assert "Traceback" not in err + out


def test_compare_on_dask_runs_each_policy_as_here(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["compare", "mast-vs-federated", "--policies", "mast,federated", "--until", "30m"]
    code, here, err_here = run_cli(capsys, *argv, "--out", str(tmp_path / "l"), "--json")
    assert code == 0
    code, there, err_there = run_cli(
        capsys, *argv, "--out", str(tmp_path / "d"), "--json", "--cluster", "local:2"
    )
    assert code == 0

    def hashes(err: str) -> list[str]:
        return [
            line.split("trace-hash: ")[1].split()[0] for line in err.splitlines() if "]" in line
        ]

    assert hashes(err_there) == hashes(err_here) and len(hashes(err_here)) == 2
    assert sorted(p.name for p in (tmp_path / "d").glob("*.db")) == ["federated.db", "mast.db"]

    def figures(out: str) -> list[dict[str, object]]:
        # The control plane's wall-clock timings are the only figures that may differ.
        return [
            {k: v for k, v in r.items() if k not in ("gms_scan_ms_avg", "rms_decision_ms")}
            for r in json.loads(out)["runs"]
        ]

    assert figures(there) == figures(here)
