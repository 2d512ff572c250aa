"""The allocation checker judges a host by its own GPU count (from the `machines` setup fact)."""

from __future__ import annotations

from typing import Any

from actors.checks.allocation import AllocationChecker
from emulator.trace import TraceEvent

FENCE = {"role": "cm/r/c0", "holder": "cm/r/c0/0", "epoch": 1}


def start(job: str, host: str, gpus: int) -> TraceEvent:
    args = [FENCE, 0, job, "train", "r/c0", 0, [[host, gpus]], []]
    return TraceEvent(0, 0, "store", "cm", "", "fleet.start", [args, [1, 0]])


def violations(machines: dict[str, Any] | None, *events: TraceEvent) -> list[str]:
    checker = AllocationChecker()
    out: list[str] = []
    if machines is not None:
        out += checker.observe(TraceEvent(0, 0, "setup", "", "", "machines", machines))
    for event in events:
        out += checker.observe(event)
    return out


def test_a_four_gpu_host_over_committed_is_caught() -> None:
    # 3 + 2 GPUs on a 4-GPU machine: within MAST's 8, but not within this host's 4.
    events = (start("a", "m0", 3), start("b", "m0", 2))
    assert violations({"m0": ["r", "gpu", 4]}, *events) == [
        "m0: 5 GPUs allocated (of 4) to a/train, b/train"
    ]
    assert violations({"m0": ["r", "gpu", 8]}, *events) == []


def test_hosts_without_facts_keep_mast_machine_size() -> None:
    assert violations(None, start("a", "m0", 8)) == []
    assert violations(None, start("a", "m0", 8), start("b", "m0", 1)) != []
