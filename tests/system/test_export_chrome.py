"""`mastemu export RUN.db --format chrome` of MAST runs, grouped (issue 18, item 4).

export: one process per region and one for the global roles; actors are
threads, job agents folded into one thread per cluster; an auction is a
span from its opening to its close (the award), a leadership term from
`lease.leader` to the holder's crash, a fault window from start to end, a
WAN copy from its order to its landing; complete slices of a thread nest;
`--level decisions` leaves the message arrows out for a much smaller file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emulator.cli.main import main
from emulator.run.events import named
from emulator.testing import run_scenario
from tests.support.chrome import process_names, spans, thread_names, unnested_slices
from tests.support.rundb import read_run_db


@pytest.fixture(scope="module")
def gms_failover(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_scenario("gms-failover", out_dir=tmp_path_factory.mktemp("chrome")).db


def export(db: Path, out: Path, *extra: str) -> list[dict[str, Any]]:
    assert main(["export", str(db), "--format", "chrome", "--out", str(out), *extra]) == 0
    return json.loads(out.read_text(encoding="utf-8"))["traceEvents"]


def test_export_chrome_mast_has_a_process_per_region_and_one_global(
    gms_failover: Path, tmp_path: Path
) -> None:
    events = export(gms_failover, tmp_path / "t.json")
    _, trace = read_run_db(gms_failover)
    machines = next(e.payload for e in trace if e.kind == "setup" and e.type == "machines")
    regions = {row[0] for row in machines.values()}
    processes = process_names(events)
    assert sorted(processes.values()) == sorted({"global"} | regions)
    pid = {name: p for p, name in processes.items()}
    threads = thread_names(events)
    where = {name: processes[p] for p, name in threads.values()}
    assert where["gms/0"] == where["gms/1"] == where["auctions"] == where["faults"] == "global"
    assert where["rms/us-east/0"] == "us-east"
    assert where["cm/eu-west/c1/2"] == "eu-west"
    # Job agents: no thread of their own, one per cluster that ran jobs.
    assert not [name for name in where if name.startswith("agent/")]
    clusters = {
        named(e).fields["cluster"] for e in trace if e.kind == "store" and e.type == "fleet.start"
    }
    assert {name for name in where if name.endswith(" jobs")} == {f"{c} jobs" for c in clusters}
    jobs = [s for s in spans(events) if s.cat == "job"]
    assert jobs and all(s.dur > 1 for s in jobs)
    assert all(s.pid == pid[s.name.split("/")[0]] for s in jobs)
    # Names and places of every process and thread, and valid nesting.
    assert {e["name"] for e in events if e["ph"] == "M"} == {
        "process_name",
        "process_sort_index",
        "thread_name",
        "thread_sort_index",
    }
    assert unnested_slices(events) == []


def test_export_chrome_spans_last_as_long_as_the_trace_says(
    gms_failover: Path, tmp_path: Path
) -> None:
    events = export(gms_failover, tmp_path / "t.json", "--level", "decisions")
    _, trace = read_run_db(gms_failover)
    found = spans(events)
    # An auction: from its opening to its award.
    opened = {
        named(e).fields["result"]: e.t_us
        for e in trace
        if e.type == "auction.open" and named(e).fields["result"] is not None
    }
    awards = [e for e in trace if e.kind == "decision" and e.type == "auction.award"]
    assert awards
    auctions = {s.args["auction"]: s for s in found if s.cat == "auction"}
    for award in awards:
        aid = award.payload["auction"]
        span = auctions[aid]
        assert (span.ts, span.dur) == (opened[aid], award.t_us - opened[aid])
        assert span.dur > 1 and span.args["winner"] == award.payload["winner"]
    # The crashed GMS leader's term ends at its crash; the next term starts at the takeover.
    crash = next(e for e in trace if e.kind == "crash" and e.dst.startswith("gms/"))
    takeover = next(
        e
        for e in trace
        if e.type == "lease.leader" and e.payload["role"] == "gms" and e.src != crash.dst
    )
    terms = {s.args["epoch"]: s for s in found if s.cat == "lease" and s.args["role"] == "gms"}
    assert terms[1].ts + terms[1].dur == crash.t_us
    assert terms[takeover.payload["epoch"]].ts == takeover.t_us
    # The crash's fault window, from its start to its end.
    start = next(e for e in trace if e.type == "crash.start")
    end = next(e for e in trace if e.type == "crash.end")
    windows = [s for s in found if s.cat == "fault"]
    assert [(w.ts, w.dur) for w in windows] == [(start.t_us, end.t_us - start.t_us)]
    assert windows[0].name.startswith("crash ")


def test_export_chrome_decisions_level_is_much_smaller_and_has_no_arrows(
    gms_failover: Path, tmp_path: Path
) -> None:
    full = export(gms_failover, tmp_path / "full.json")
    small = export(gms_failover, tmp_path / "small.json", "--level", "decisions")
    assert (tmp_path / "small.json").stat().st_size * 4 < (tmp_path / "full.json").stat().st_size
    assert {e["ph"] for e in full} >= {"s", "f"}
    assert not {e["ph"] for e in small} & {"s", "f"}
    # Every arrow starts and ends on a slice of its sender's and receiver's threads.
    slices = {(e["tid"], e["ts"]) for e in full if e["ph"] == "X"}
    assert all((e["tid"], e["ts"]) in slices for e in full if e["ph"] in "sf")

    # The same spans either way, and the same bytes every time.
    def named_spans(events: list[dict[str, Any]]) -> list[tuple[str, str, str, int, int]]:
        threads = thread_names(events)
        return sorted(
            (threads[s.tid][1], s.name, s.cat, s.ts, s.dur) for s in spans(events) if s.cat
        )

    assert named_spans(small) == named_spans(full)
    export(gms_failover, tmp_path / "again.json", "--level", "decisions")
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "small.json").read_bytes()


def test_export_chrome_wan_copy_spans_from_order_to_landing(tmp_path: Path) -> None:
    run = run_scenario("wan-partition-migration", out_dir=tmp_path)
    events = export(run.db, tmp_path / "t.json", "--level", "decisions")
    _, trace = read_run_db(run.db)
    ordered = {
        named(e).fields["result"]: e.t_us
        for e in trace
        if e.type == "migration.order" and named(e).fields["result"] is not None
    }
    landed = {named(e).fields["copy_id"]: e.t_us for e in trace if e.type == "migration.done"}
    copies = {s.args["copy"]: s for s in spans(events) if s.cat == "copy"}
    assert landed and set(copies) == set(ordered)
    for cid, t_us in landed.items():
        assert (copies[cid].ts, copies[cid].dur) == (ordered[cid], t_us - ordered[cid])
    where = {name: p for p, name in thread_names(events).values()}
    assert process_names(events)[where["WAN copies"]] == "global"
    # The partition cut the copies' flows: each flow is a span too.
    assert [s for s in spans(events) if s.cat == "flow"]
