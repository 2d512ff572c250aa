"""A gang whose later job runs on machines an earlier job's victim frees waits for that victim too.

Found in a fault-free `tetris-rebalance`: w000037's trainer preempted w000017, and
its evaluator was placed on another of w000017's machines. The placement counted
the victim's machines free for every job after the one that chose it, but only
the trainer's plan named the victim: the CM refused the evaluator at once (the
victim still held the machine, checkpointing), and once the trainer started the
RMS rolled the gang back. The victim had been preempted for nothing. Every plan
of a gang that counts on a victim's machines now names it (`place_workload`).
"""

from __future__ import annotations

from pathlib import Path

from emulator.units import MIN, H
from tests.support.dsl import job, run, scenario, states, workload
from tests.support.trace import decisions, started_once


def gang_story() -> dict[str, object]:
    """One region of 4 machines of 8 GPUs: L (priority 5) fills them; at 1 h H
    (priority 1) needs two jobs of 8 GPUs each, so it preempts L."""
    return scenario(
        [
            workload("L", "lo", 0, job(gpus=32, work=3 * H)),
            workload("H", "hi", 60 * MIN, job("trainer", gpus=8), job("evaluator", gpus=8)),
        ],
        regions=("east",),
        duration="3h",
    )


def test_a_gang_preempting_one_victim_for_two_jobs_starts_whole(tmp_path: Path) -> None:
    result, events = run(gang_story(), tmp_path)
    assert result.violations == []
    (dispatch,) = [d for d in decisions(events, "rms.dispatch") if d["workload"] == "H"]
    assert dispatch["victims"] == [["L", "trainer"]]
    assert not decisions(events, "cm.reject")
    assert not decisions(events, "dispatch.failed")
    # H started once, whole; L was preempted once, for it, and ran again after it.
    assert started_once(events, "H") == {"H/trainer": 1, "H/evaluator": 1}
    assert states(result)["H"] == ("DONE", 0)
    assert states(result)["L"][0] in ("DONE", "RUNNING")
