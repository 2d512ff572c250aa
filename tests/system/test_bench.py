"""`mastemu bench gms|rms`, small: the benchmarks run and report what they promise.

Fast smoke tests at reduced sizes (the real sizes are the defaults); they
check the shape and sense of the results, not the timings. `bench day` runs
a whole emulated day and is never part of the default run.
"""

from __future__ import annotations

import json

import pytest

from actors.mast.bench.control_plane import bench_gms, bench_rms
from emulator.cli import main as cli
from emulator.registry import BENCHES, load_plugins


def test_the_benchmarks_are_registered() -> None:
    load_plugins()
    assert {"gms", "rms", "day"} <= set(BENCHES)


def test_gms_bench_scans_the_whole_queue() -> None:
    out = bench_gms({"workloads": 400, "tenants": 30, "running": 80, "repeat": 2})
    assert out["workloads"] == 400 and out["tenants"] == 30
    assert out["running_workloads"] == 80
    assert out["window_samples"] == 288  # a day of 5-minute passes
    assert 0 < out["within_quota"] <= 400
    assert out["scan_ms"] > 0 and out["target_ms"] == 50
    # The ratio is rounded from the unrounded time, so it may differ from the
    # rounded time's ratio in the last decimal.
    assert out["ratio"] == pytest.approx(out["scan_ms"] / 50, abs=1e-3)


def test_rms_bench_decides_with_and_without_preemption() -> None:
    # Two clusters of the full-size region's shape: 125 GPU and 3,200 CPU machines each.
    out = bench_rms({"clusters": 2, "gpu_machines": 250, "cpu_machines": 6_400, "repeat": 2})
    assert out["clusters"] == 2 and out["gpus"] == 2_000
    assert 0.85 <= out["gpu_allocated"] <= 0.91 and 0.85 <= out["cpu_allocated"] <= 0.91
    assert out["preemption_victims"] > 0
    for key in ("no_preemption_ms", "preemption_ms", "snapshot_build_ms", "index_build_ms"):
        assert out[key] > 0
    assert (out["no_preemption_target_ms"], out["preemption_target_ms"]) == (1.3, 5.5)


def test_bench_prints_one_json_object(capsys, monkeypatch) -> None:
    load_plugins()
    small = {"workloads": 100, "tenants": 10, "repeat": 1}
    monkeypatch.setitem(BENCHES, "gms", lambda options: bench_gms({**options, **small}))
    assert cli.main(["bench", "gms", "--json"]) == 0
    text = capsys.readouterr().out
    assert text.count("\n") == 1  # one line: one JSON object
    out = json.loads(text)
    assert out["workloads"] == 100 and out["tenants"] == 10 and out["scan_ms"] > 0


def test_a_timed_run_reports_every_hour_and_what_failed() -> None:
    from actors.mast.bench.day import run_timed
    from emulator.units import H

    load_plugins()
    assert {"week", "scale"} <= set(BENCHES)
    out = run_timed("quickstart", 2 * H, "day")
    assert out["emulated_s"] == 7200 and len(out["wall_s_per_hour"]) == 2
    assert len(out["queued_per_hour"]) == 2 and all(q >= 0 for q in out["queued_per_hour"])
    assert len(out["events_per_hour"]) == 2 and min(out["events_per_hour"]) >= 0
    assert sum(out["events_per_hour"]) > 0
    assert (out["actor_crashes"], out["invariant_violations"], out["status"]) == (0, 0, "ok")
    assert out["db_mb"] > 0 and out["peak_rss_mb"] > 0 and 0 < out["gpu_allocation_loaded"] <= 1
    # wall_s is printed to 0.1 s: the compression is within what that rounding allows.
    wall = out["wall_s"]
    assert 7200 / (wall + 0.05) <= out["compression"] <= 7200 / max(wall - 0.05, 1e-3)
    assert out["wall_s_target"] == 120.0 and out["control_plane"]["paper"]["rms_preemption_ms"]


@pytest.mark.parametrize(
    ("per_hour", "events", "first", "growth"),
    [
        ([9.0, 2.0, 3.0], [900, 100, 150], 1, 1.0),  # 1.5x the work at the same cost per event
        ([9.0, 2.0, 3.0], [900, 100, 100], 1, 1.5),  # the same work costing 1.5x
        ([9.0, 2.0, 2.0], [900, 100, 200], 1, 0.5),
        ([9.0, 2.0], [900, 100], 1, None),  # no hour after the first loaded one
        ([9.0, 2.0, 3.0], [900, 0, 100], 1, None),  # an hour without events: no ratio
        ([9.0, 2.0, 3.0], [900, 100], 1, None),  # series of different lengths
    ],
)
def test_event_cost_growth_divides_out_the_work(per_hour, events, first, growth) -> None:
    from actors.mast.bench.day import event_cost_growth

    assert event_cost_growth(per_hour, events, first) == growth
