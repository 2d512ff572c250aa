"""The baselines of Tiresias §5: fifo (YARN-CS), best-effort, srtf/SRSF, gandiva.

Decision-level tables on hand-built views, then small runs on the reference
engine with communication and preemption costs off, so a job of duration D
runs exactly D. `S` is one second in µs.
"""

from __future__ import annotations

import msgspec
import pytest

from actors.cluster.engine import Semantics, cluster_of, simulate
from actors.policies.cluster.api import ClusterView, JobView, Slot, TraceJob
from actors.policies.cluster.baselines import (
    BestEffort,
    Fifo,
    FifoParams,
    Gandiva,
    GandivaParams,
    GandivaState,
    Srtf,
    SrtfParams,
)
from actors.policies.cluster.registry import cluster_policy
from emulator.units import S

EVENT = Semantics(comm_model=False, preemption_cost=False)


def machines(*free: int, total: int = 4) -> tuple[Slot, ...]:
    return tuple(
        Slot(host=f"m{i:03d}", rack="r00", gpus_total=total, gpus_free=f)
        for i, f in enumerate(free)
    )


def job(
    job_id: str,
    gpus: int,
    *,
    submit_s: float = 0,
    on: tuple[tuple[str, int], ...] = (),
    duration_s: float = 100,
    progress: float = 0.0,
) -> JobView:
    return JobView(
        job_id=job_id,
        gpus=gpus,
        model="resnet50",
        submit_us=round(submit_s * S),
        queued_since_us=round(submit_s * S),
        duration_us=round(duration_s * S),
        first_start_us=0 if on else None,
        placement=on,
        progress=progress,
    )


def trace(*jobs: tuple[str, float, int, float]) -> tuple[TraceJob, ...]:
    """(job_id, submit_s, gpus, duration_s) rows."""
    return tuple(
        TraceJob(
            job_id=j, submit_us=round(t * S), gpus=g, model="resnet50", duration_us=round(d * S)
        )
        for j, t, g, d in jobs
    )


def finishes(name: str, params, jobs, slots) -> dict[str, float]:
    result = simulate(cluster_policy(name), params, jobs, slots, EVENT)
    return {r.job_id: r.finish_us / S for r in result.jobs}


# Two 4-GPU machines, each half held by an earlier job: 2 + 2 GPUs free.
# Waiting: A (4 GPUs, arrived first), then B (1 GPU).
HALF_FULL = (
    machines(2, 2),
    job("r0", 2, on=(("m000", 2),)),
    job("r1", 2, on=(("m001", 2),)),
    job("a", 4, submit_s=1),
    job("b", 1, submit_s=2),
)


@pytest.mark.parametrize(
    ("policy", "params", "started"),
    [
        # YARN-CS: A needs one whole machine (the fewest possible): blocked, and B
        # behind it waits too (head-of-line blocking).
        (Fifo(), FifoParams(), []),
        # Best-effort: A is skipped, B takes the tightest hole (tie: m000).
        (BestEffort(), FifoParams(), [("b", (("m000", 1),))]),
        # Without strict consolidation A spreads 2 + 2 and B has nothing left.
        (Fifo(), FifoParams(consolidate=False), [("a", (("m000", 2), ("m001", 2)))]),
    ],
    ids=["fifo-blocks", "best-effort-backfills", "fifo-spread"],
)
def test_fifo_and_best_effort_decisions(policy, params, started) -> None:
    slots, *jobs = HALF_FULL
    v = ClusterView(now_us=2 * S, machines=slots, jobs=tuple(jobs))
    decision, _ = policy.decide(v, policy.initial_state(params), params)
    assert [(s.job_id, s.placement) for s in decision.start] == started
    assert decision.preempt == ()


# One 4-GPU machine. j1 (2 GPUs, 10 s) at t=0; j2 (4 GPUs, 5 s) at t=1 cannot
# start before j1 ends; j3 (2 GPUs, 3 s) at t=2 would fit beside j1.
#   fifo:        j3 waits behind j2: j1 0-10, j2 10-15, j3 15-18 -> JCT 10, 14, 16
#   best-effort: j3 2-5 beside j1;   j1 0-10, j2 10-15         -> JCT 10, 14, 3
HOL = trace(("j1", 0, 2, 10), ("j2", 1, 4, 5), ("j3", 2, 2, 3))


@pytest.mark.parametrize(
    ("name", "expected"),
    [("fifo", {"j1": 10, "j2": 15, "j3": 18}), ("best-effort", {"j1": 10, "j2": 15, "j3": 5})],
)
def test_head_of_line_blocking_end_to_end(name: str, expected: dict[str, float]) -> None:
    assert finishes(name, FifoParams(), HOL, cluster_of(1, 4, 1)) == expected


@pytest.mark.parametrize(
    ("remaining", "waiting_gpus", "waiting_left_s", "preempted"),
    [
        # R: 2 GPUs, 100 s left; the only 2 GPUs are R's.
        # W needs 2 GPUs for 10 s < 100 s: SRTF preempts R.
        ("time", 2, 10, True),
        # W needs 200 s: R stays.
        ("time", 2, 200, False),
        # W: 1 GPU × 150 s. SRTF: 150 > 100, R stays. SRSF: 150 GPU-s < 200: R goes.
        ("time", 1, 150, False),
        ("service", 1, 150, True),
        # A tie (100 s each) keeps the running job.
        ("time", 2, 100, False),
    ],
)
def test_srtf_preempts_the_job_with_more_remaining(
    remaining, waiting_gpus, waiting_left_s, preempted
) -> None:
    # R has done half of 200 s: 100 s left. W has done 0.
    r = job("r", 2, on=(("m000", 2),), duration_s=200, progress=0.5)
    w = job("w", waiting_gpus, submit_s=5, duration_s=waiting_left_s)
    params = SrtfParams(remaining=remaining)
    v = ClusterView(now_us=5 * S, machines=machines(0, total=2), jobs=(r, w))
    decision, _ = Srtf().decide(v, None, params)
    assert decision.preempt == (("r",) if preempted else ())
    assert [s.job_id for s in decision.start] == (["w"] if preempted else [])
    assert decision.wake_at_us is None


def test_srtf_preemption_order_end_to_end() -> None:
    # One 2-GPU machine. j1 (2 GPUs, 10 s) at 0; j2 (1 GPU, 3 s) at 2; j3 (1 GPU, 20 s) at 3.
    #  t=2: j2 (3 left) < j1 (8 left): j1 is preempted, j2 runs on one GPU.
    #  t=3: j3 (20) ranks after j1 (8), but j1 cannot fit beside j2, so j3
    #       takes the idle GPU (no head-of-line blocking).
    #  t=5: j2 done; j1 (8) outranks j3 (18 left): j3 is preempted, j1 runs 5-13.
    #  t=13: j3 resumes with 18 s left: done at 31.
    jobs = trace(("j1", 0, 2, 10), ("j2", 2, 1, 3), ("j3", 3, 1, 20))
    result = simulate(Srtf(), SrtfParams(), jobs, cluster_of(1, 2, 1), EVENT)
    assert {r.job_id: (r.finish_us / S, r.preemptions) for r in result.jobs} == {
        "j1": (13, 1),
        "j2": (5, 0),
        "j3": (31, 1),
    }


@pytest.mark.parametrize(
    ("quantum_s", "expected"),
    [
        # One GPU, two 100-s jobs at t=0, 60-s slices:
        #  j1 0-60, j2 60-120, j1 120-160 (done: 60 + 40), j2 160-200 (done).
        (60.0, {"j1": (160, 1), "j2": (200, 1)}),
        # 30-s slices: j1 runs 0-30, 60-90, 120-150, 180-190 (done at 190);
        #  j2 runs 30-60, 90-120, 150-180, 190-200 (done at 200). Each is
        #  preempted 3 times (j1 at 30, 90, 150; j2 at 60, 120, 180).
        (30.0, {"j1": (190, 3), "j2": (200, 3)}),
    ],
)
def test_gandiva_time_slices(quantum_s: float, expected) -> None:
    jobs = trace(("j1", 0, 1, 100), ("j2", 0, 1, 100))
    result = simulate(
        Gandiva(), GandivaParams(quantum_s=quantum_s), jobs, cluster_of(1, 1, 1), EVENT
    )
    assert {r.job_id: (r.finish_us / S, r.preemptions) for r in result.jobs} == expected


def test_gandiva_does_not_slice_when_nobody_waits() -> None:
    # Two GPUs for two jobs: both run to completion, no wake-ups, no preemption.
    jobs = trace(("j1", 0, 1, 100), ("j2", 0, 1, 150))
    result = simulate(Gandiva(), GandivaParams(), jobs, cluster_of(1, 2, 1), EVENT)
    assert {r.job_id: (r.finish_us / S, r.preemptions) for r in result.jobs} == {
        "j1": (100, 0),
        "j2": (150, 0),
    }


def test_gandiva_decision_yields_the_longest_running_expired_job() -> None:
    # Two 1-GPU machines; x began its slice at t=0, y at t=30, z at t=90 waits.
    # At t=90 with a 60-s quantum both x and y are expired; x has run longest
    # and yields. y's slice ended at 90 too, but one GPU is enough for z.
    x = job("x", 1, on=(("m000", 1),))
    y = job("y", 1, on=(("m001", 1),))
    z = job("z", 1, submit_s=90)
    state = GandivaState(slice_start_us={"x": 0, "y": 30 * S})
    v = ClusterView(now_us=90 * S, machines=machines(0, 0, total=1), jobs=(x, y, z))
    decision, after = Gandiva().decide(v, state, GandivaParams())
    assert decision.preempt == ("x",)
    assert [(s.job_id, s.placement) for s in decision.start] == [("z", (("m000", 1),))]
    # x now waits: wake when the next slice ends, z's at 150 (y's has passed).
    assert decision.wake_at_us == 150 * S
    assert after.slice_start_us == {"y": 30 * S, "z": 90 * S}


@pytest.mark.parametrize(
    ("cls", "params", "message"),
    [
        (GandivaParams, {"quantum_s": 0}, "gandiva.quantum_s must be > 0"),
        (SrtfParams, {"remaining": "gpus"}, "Invalid enum value 'gpus' - at `$.remaining`"),
        (FifoParams, {"consolidated": True}, "unknown field `consolidated`"),
    ],
)
def test_param_validation(cls, params, message: str) -> None:
    with pytest.raises(msgspec.ValidationError) as err:
        msgspec.convert(params, cls)
    assert message in str(err.value)
