"""A new GMS leader tells each region again of the awards still DISPATCHING.

Found by `mastemu explore cm-failover-preemption --seed 5` (3 min), shrunk to
three faults: the GMS leader awards w000061 to ap-south at 51m30.29s; the
Award is lost on the lossy WAN, and the leader crashes half a second later,
before its reliable send resends it. The award stood in the store and no RMS
knew of it: the workload stayed DISPATCHING to the end of the run (a liveness
failure, no invariant broken). The next leader now sends every standing
award again; an RMS ignores one already under way.
"""

from __future__ import annotations

from pathlib import Path

from emulator.liveness import judge_liveness
from emulator.registry import builtin_scenarios, load_plugins
from emulator.run.scenario import parse_raw
from tests.support.dsl import run

load_plugins()

FAULTS = [
    {
        "action": "pause",
        "at": "46m42.251908s",
        "target": "leader of gms",
        "duration": "3m49.50037s",
    },
    {
        "action": "loss",
        "at": "46m52.626591s",
        "duration": "16m31.418643s",
        "between": ["ap-south", "eu-west"],
        "probability": 0.3,
    },
    {
        "action": "crash",
        "at": "49m30.767775s",
        "target": "leader of gms",
        "restart_after": "2m23.445279s",
    },
]


def test_an_award_lost_with_its_sender_is_sent_again_by_the_next_leader(tmp_path: Path) -> None:
    raw = parse_raw(builtin_scenarios()["cm-failover-preemption"].read_text(), "cmf.toml")
    raw["duration"] = "90m"
    raw["faults"] = FAULTS
    result, events = run(raw, tmp_path)
    assert result.violations == []
    # The story happened: an Award was dropped, and its sender crashed before it
    # could resend (if a change moves these instants, rebuild the story: w000061's
    # at 51m30.29s when found, w000056's at 49m30.29s since one-at-a-time bids hold).
    (lost,) = [e for e in events if e.kind == "drop" and e.type == "Award"]
    workload = lost.payload[1]["msg"]["msg"]["workload_id"]
    crash = next(e for e in events if e.kind == "crash" and e.dst == lost.src)
    assert lost.t_us < crash.t_us < lost.t_us + 1_000_000
    # The next leader told ap-south again; its RMS dispatched, and nothing is stuck.
    resent = [
        e
        for e in events
        if e.kind == "deliver"
        and e.type == "Award"
        and e.src != lost.src
        and workload in str(e.payload)
    ]
    assert resent and resent[0].dst.startswith("rms/ap-south/")
    dispatched = [
        e for e in events if e.type == "rms.dispatch" and e.payload["workload"] == workload
    ]
    assert len(dispatched) == 1 and dispatched[0].t_us >= resent[0].t_us
    assert [s for r in judge_liveness(events) for s in r.stuck] == []
