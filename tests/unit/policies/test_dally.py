"""Dally (actors/policies/cluster/dally/): Nw_sens, Algorithms 1 and 2, preemption."""

from __future__ import annotations

import math

import msgspec
import pytest

from actors.cluster.engine import Semantics, cluster_of, simulate
from actors.policies.cluster import perf_model
from actors.policies.cluster.api import ClusterView, JobView, Slot, Start, TraceJob
from actors.policies.cluster.dally.policy import DallyParams, nw_sens
from actors.policies.cluster.dally.timers import (
    FOREVER_US,
    DallyState,
    WaitSample,
    agent_accepts,
    record_wait,
    tuned_timer_us,
)
from actors.policies.cluster.registry import cluster_policy
from emulator.units import H, S

DALLY = cluster_policy("dally")
AUTO = DallyParams()
NO_WAIT = DallyParams(timers="no-wait")
FULL = DallyParams(timers="fully-consolidated")
MANUAL = DallyParams(timers="manual", machine_timer_s=100.0, rack_timer_s=300.0)


def slot(host: str, rack: str, free: int, total: int = 8) -> Slot:
    return Slot(host=host, rack=rack, gpus_total=total, gpus_free=free)


def job(
    job_id: str,
    gpus: int,
    *,
    progress: float = 0.0,
    executed_s: float = 0.0,
    duration_s: float | None = None,
    model: str = "toy",
    queued_s: float = 0.0,
    placement: tuple[tuple[str, int], ...] = (),
) -> JobView:
    """A job view; without `duration_s` its ideal (compute-only) run time is 100 s.

    The ideal is the duration without machine-tier communication, so the
    default duration is 100 s x (1 + comm_fraction(model, machine, gpus)).
    """
    if duration_s is None:
        duration_s = 100.0 * (1.0 + perf_model.comm_fraction(model, "machine", gpus))
    return JobView(
        job_id=job_id,
        gpus=gpus,
        model=model,
        submit_us=0,
        queued_since_us=int(queued_s * S),
        duration_us=int(duration_s * S),
        placement=placement,
        progress=progress,
        executed_us=int(executed_s * S),
    )


def view(now_s: float, machines: tuple[Slot, ...], *jobs: JobView) -> ClusterView:
    return ClusterView(now_us=int(now_s * S), machines=machines, jobs=jobs)


# --- Nw_sens = W_compl / T_norm = progress / (executed / ideal) -------------------------------

NW_SENS_CASES = [
    # (name, job, expected)
    # 1 GPU: no communication, ideal = duration = 100 s; T_norm = 50/100; 0.5 / 0.5
    ("1 GPU at full speed", job("a", 1, progress=0.5, executed_s=50, duration_s=100), 1.0),
    # 8 GPUs ResNet50 (Table I machine: 12%): ideal = 112/1.12 = 100 s;
    # T_norm = 56/100 = 0.56; 0.25 / 0.56
    (
        "resnet50, 8 GPUs",
        job("b", 8, progress=0.25, executed_s=56, duration_s=112, model="ResNet50"),
        0.25 / 0.56,
    ),
    # MobileNetV3 (42%), name spelt differently: ideal = 142/1.42 = 100 s; T_norm 1.42; 0.5/1.42
    (
        "mobilenet, slowed",
        job("c", 8, progress=0.5, executed_s=142, duration_s=142, model="MobileNet-V3"),
        0.5 / 1.42,
    ),
    # unknown model: perf_model's default profile, 7.5% at machine tier for 8 GPUs:
    # ideal = 107.5/1.075 = 100 s; T_norm = 50/100; 0.5 / 0.5
    ("unknown model", job("e", 8, progress=0.5, executed_s=50, duration_s=107.5), 1.0),
    # 4 GPUs ResNet50: Table I's 12% scaled by ring traffic per GPU (3/4)/(7/8) = 6/7:
    # c = 0.72/7 = 0.10286; ideal = 100/1.10286 = 90.67 s; T_norm = 50/90.67; 0.5 / that
    (
        "resnet50, 4 GPUs",
        job("h", 4, progress=0.5, executed_s=50, duration_s=100, model="resnet50"),
        1 / (1 + 0.72 / 7),
    ),
    # 1 GPU ResNet50: no machine-tier communication on one GPU, ideal = 100 s;
    # ran 200 s for 0.5 -> T_norm 2; 0.5 / 2
    (
        "1-GPU resnet50",
        job("f", 1, progress=0.5, executed_s=200, duration_s=100, model="resnet50"),
        0.25,
    ),
    # nothing completed yet: W_compl = 0 -> 0 (first in line, like a fresh 2D-LAS job)
    ("never ran", job("d", 8), 0.0),
    ("ran, nothing done", job("g", 8, executed_s=10), 0.0),
]


@pytest.mark.parametrize(
    ("job_view", "expected"), [c[1:] for c in NW_SENS_CASES], ids=[c[0] for c in NW_SENS_CASES]
)
def test_nw_sens_is_work_done_over_normalised_run_time(job_view: JobView, expected: float) -> None:
    assert nw_sens(job_view) == pytest.approx(expected)


def test_offers_go_in_increasing_nw_sens() -> None:
    # Two free 8-GPU machines, four waiting 8-GPU gangs. Nw_sens:
    #   fresh = 0; moby = 0.5/1.42 = 0.352; resnet = 0.25/0.56 = 0.446; fast = 1.0.
    # fresh takes the tightest machine (both have 8 free: m000 by name), moby the other;
    # resnet and fast get nothing (no rack offer either: both machines are taken).
    machines = (slot("m000", "r00", 8), slot("m001", "r00", 8))
    jobs = (
        job("fast", 8, progress=0.5, executed_s=50),
        job("resnet", 8, progress=0.25, executed_s=56, duration_s=112, model="resnet50"),
        job("moby", 8, progress=0.5, executed_s=142, duration_s=142, model="mobilenetv3"),
        job("fresh", 8),
    )
    decision, _ = DALLY.decide(view(0, machines, *jobs), DALLY.initial_state(AUTO), AUTO)
    assert [(s.job_id, s.placement, s.tier) for s in decision.start] == [
        ("fresh", (("m000", 8),), "machine"),
        ("moby", (("m001", 8),), "machine"),
    ]
    assert decision.preempt == ()


# --- Algorithm 1: the agent's answer ------------------------------------------------------

TIMERS = (("machine_timer_us", 100.0 * S), ("rack_timer_us", 300.0 * S))
NO_TIMERS = (("machine_timer_us", 0.0), ("rack_timer_us", 0.0))

ALGO1_CASES = [
    # (tier, note, waited s, accepts?)
    ("machine", TIMERS, 0, True),  # machine tier: at once
    ("rack", TIMERS, 0, False),  # before the machine timer (100 s)
    ("rack", TIMERS, 99, False),
    ("rack", TIMERS, 100, True),  # machine timer run out
    ("network", TIMERS, 100, False),  # network waits for the rack timer (300 s)
    ("network", TIMERS, 299, False),
    ("network", TIMERS, 300, True),
    ("network", NO_TIMERS, 0, True),  # Dally-noWait: everything at once
    ("rack", (("machine_timer_us", FOREVER_US), ("rack_timer_us", FOREVER_US)), 10**9, False),
]


@pytest.mark.parametrize(("tier", "note", "waited_s", "expected"), ALGO1_CASES)
def test_agent_follows_algorithm_1(tier, note, waited_s, expected) -> None:
    assert agent_accepts(tier, note, waited_s * S) is expected
    # The policy's `accepts` measures the wait from when the job entered the queue (at 50 s).
    offer = Start(job_id="j", placement=(("m000", 8),), tier=tier, note=note)
    queued = job("j", 8, queued_s=50)
    assert DALLY.accepts(offer, queued, (50 + waited_s) * S, AUTO) is expected


def test_agent_refuses_an_offer_without_timers() -> None:
    with pytest.raises(ValueError, match="rack_timer_us"):
        agent_accepts("rack", (("machine_timer_us", 0.0),), 0)


# --- Algorithm 2: mean + 2 sample std per (tier, GPU demand), within the window -----------


def samples(tier: str, gpus: int, *waits_s: float, at_s: float = 0.0) -> tuple[WaitSample, ...]:
    return tuple(
        WaitSample(tier=tier, gpus=gpus, at_us=int(at_s * S), wait_us=int(w * S)) for w in waits_s
    )


HISTORY = DallyState(
    waits=(
        *samples("machine", 8, 10, 20, 30),  # mean 20, std sqrt((100+0+100)/2) = 10
        *samples("machine", 4, 100),  # one sample: no sample std yet
        *samples("rack", 8, 0, 0, 60, 60),  # mean 30, std sqrt(4*900/3) = sqrt(1200)
        *samples("rack", 2, 1_000, 1_000, at_s=-200),  # mean 1000, std 0; recorded at -200 s
    )
)

ALGO2_CASES = [
    # (tier, gpus, window s, expected timer s)
    ("machine", 8, 10_000, 20 + 2 * 10),  # 40
    ("machine", 4, 10_000, 7.0),  # one sample is not enough: the initial 7 s
    ("rack", 8, 10_000, 30 + 2 * math.sqrt(1_200)),  # 99.28
    ("machine", 2, 10_000, 7.0),  # no list for 2 GPUs at machine tier: the initial 7 s
    ("rack", 2, 200, 1_000),  # age 200 s == window: kept
    ("rack", 2, 199, 7.0),  # age 200 s > window: evicted, back to the initial timer
]


@pytest.mark.parametrize(("tier", "gpus", "window_s", "expected_s"), ALGO2_CASES)
def test_auto_tuner_is_mean_plus_two_sample_std(tier, gpus, window_s, expected_s) -> None:
    got = tuned_timer_us(HISTORY, tier, gpus, 0, window_s * S, 7.0 * S)
    assert got == pytest.approx(expected_s * S)


def test_wait_lists_keep_the_newest_samples_within_window_and_count() -> None:
    state = DallyState()
    # count_max 2: the third 8-GPU machine sample pushes out the first; the 4-GPU list is apart.
    for at_s, gpus, wait_s in ((0, 8, 1), (1, 4, 2), (2, 8, 3), (3, 8, 4)):
        sample = WaitSample(tier="machine", gpus=gpus, at_us=at_s * S, wait_us=wait_s * S)
        state = record_wait(state, sample, 100 * S, 2)
    assert [(w.gpus, w.wait_us // S) for w in state.waits] == [(4, 2), (8, 3), (8, 4)]
    # A sample at 150 s with a 100 s window drops everything recorded before 50 s.
    late = WaitSample(tier="rack", gpus=8, at_us=150 * S, wait_us=5 * S)
    assert record_wait(state, late, 100 * S, 2).waits == (late,)
    # The state round-trips through JSON (the store keeps it).
    assert msgspec.json.decode(msgspec.json.encode(state), type=DallyState) == state


def test_decide_uses_tuned_timers_and_records_the_wait() -> None:
    # Rack r00: two machines with 4 free each, so an 8-GPU gang can only get rack tier.
    # History for 8 GPUs at machine tier: 10, 20, 30 s -> timer 40 s (case above).
    machines = (slot("m000", "r00", 4), slot("m001", "r00", 4))
    state = DallyState(waits=samples("machine", 8, 10, 20, 30, at_s=0))
    waiting = job("w", 8, queued_s=100)
    # At 130 s it has waited 30 s < 40 s: it turns the rack offer down; wake at 100 + 40 s.
    decision, same = DALLY.decide(view(130, machines, waiting), state, AUTO)
    assert decision.start == () and decision.wake_at_us == 140 * S and same == state
    # At 140 s the machine timer has run out: it takes rack tier. The note carries the
    # timers (machine 40 s; rack: no list -> the initial 24 h); the 40 s wait is recorded.
    decision, after = DALLY.decide(view(140, machines, waiting), state, AUTO)
    (offer,) = decision.start
    assert offer.tier == "rack" and offer.placement == (("m000", 4), ("m001", 4))
    assert dict(offer.note) == pytest.approx({"machine_timer_us": 40 * S, "rack_timer_us": 24 * H})
    assert after.waits[-1] == WaitSample(tier="rack", gpus=8, at_us=140 * S, wait_us=40 * S)


# --- variants: manual, no-wait, fully consolidated ----------------------------------------

SPLIT = (slot("m000", "r00", 4), slot("m001", "r00", 4), slot("m002", "r01", 8, total=8))
SPREAD = (slot("m000", "r00", 4), slot("m001", "r01", 4))

VARIANT_CASES = [
    # (name, params, machines, gpus, waited s, expected tier or None, wake s or None)
    ("manual: rack refused before 100 s", MANUAL, SPLIT[:2], 8, 50, None, 100),
    ("manual: rack taken at 100 s", MANUAL, SPLIT[:2], 8, 100, "rack", None),
    ("manual: network refused before 300 s", MANUAL, SPREAD, 8, 200, None, 300),
    ("manual: network taken at 300 s", MANUAL, SPREAD, 8, 300, "network", None),
    ("no-wait: network at once", NO_WAIT, SPREAD, 8, 0, "network", None),
    ("full: rack never taken", FULL, SPLIT[:2], 8, 10**6, None, None),
    ("full: a free machine is taken", FULL, SPLIT, 8, 0, "machine", None),
    # 12 GPUs cannot fit one 8-GPU machine: machine timer 0, rack tier at once even if full...
    (
        "full: 12 GPUs take rack at once",
        FULL,
        (*SPLIT[:2], slot("m003", "r00", 8)),
        12,
        0,
        "rack",
        None,
    ),
    # ...but never network.
    ("full: 12 GPUs never network", FULL, (*SPREAD, slot("m003", "r01", 4)), 12, 10**6, None, None),
]


@pytest.mark.parametrize(
    ("params", "machines", "gpus", "waited_s", "tier", "wake_s"),
    [c[1:] for c in VARIANT_CASES],
    ids=[c[0] for c in VARIANT_CASES],
)
def test_variants_wait_as_the_paper_says(params, machines, gpus, waited_s, tier, wake_s) -> None:
    decision, _ = DALLY.decide(view(waited_s, machines, job("w", gpus)), DallyState(), params)
    assert [s.tier for s in decision.start] == ([tier] if tier else [])
    assert decision.wake_at_us == (None if wake_s is None else wake_s * S)


# --- network-sensitive preemption ---------------------------------------------------------

# One rack, two full 8-GPU machines. Nw_sens (ideal run time 100 s, see `job`):
#   big  on m000 (8): 0.45 / (50/100) = 0.90
#   low  on m001 (4): 0.25 / (50/100) = 0.50
#   top  on m001 (4): 0.475 / (50/100) = 0.95
FULL_RACK = (slot("m000", "r00", 0), slot("m001", "r00", 0))
BIG = job("big", 8, progress=0.45, executed_s=50, placement=(("m000", 8),))
LOW = job("low", 4, progress=0.25, executed_s=50, placement=(("m001", 4),))
TOP = job("top", 4, progress=0.475, executed_s=50, placement=(("m001", 4),))
RUNNING = (BIG, LOW, TOP)

PREEMPT_CASES = [
    # (name, params, waiting job, expected preemptions, expected start)
    # Waiter at 0.6 needs a whole machine. Higher than 0.6: top (0.95), big (0.90).
    # Taking top frees only 4 on m001 (low keeps the rest); adding big frees m000 -> fits.
    # Sparing pass, latest first: without big nothing fits; without top m000 alone does,
    # so top is spared: only big goes.
    (
        "frees a machine",
        AUTO,
        job("w", 8, progress=0.3, executed_s=50),
        ("big",),
        ("w", (("m000", 8),), "machine"),
    ),
    # A fresh job (0) needs 4: top alone frees 4 on m001 -> the highest victim suffices.
    ("fresh job, 4 GPUs", AUTO, job("w", 4), ("top",), ("w", (("m001", 4),), "machine")),
    # Waiter at 0.97 is above every runner: nobody may be preempted for it.
    ("no higher runner", AUTO, job("w", 8, progress=0.485, executed_s=50), (), None),
    # Waiter at 0.92: only top (0.95) is higher and frees 4 < 8: no preemption at all.
    ("victims too small", AUTO, job("w", 8, progress=0.46, executed_s=50), (), None),
    ("switched off", DallyParams(preemption=False), job("w", 4), (), None),
]


@pytest.mark.parametrize(
    ("params", "waiting", "preempted", "start"),
    [c[1:] for c in PREEMPT_CASES],
    ids=[c[0] for c in PREEMPT_CASES],
)
def test_preemption_makes_room_for_lower_nw_sens(params, waiting, preempted, start) -> None:
    decision, _ = DALLY.decide(view(0, FULL_RACK, *RUNNING, waiting), DallyState(), params)
    assert decision.preempt == preempted
    assert [(s.job_id, s.placement, s.tier) for s in decision.start] == ([start] if start else [])


def test_preemption_is_not_sought_when_an_accepted_offer_exists() -> None:
    # m000 and m001 each have 4 free beside a running 0.9 job: rack tier is free now.
    machines = (slot("m000", "r00", 4), slot("m001", "r00", 4))
    runners = (
        job("r0", 4, progress=0.45, executed_s=50, placement=(("m000", 4),)),
        job("r1", 4, progress=0.45, executed_s=50, placement=(("m001", 4),)),
    )
    fresh = job("w", 8)
    # No-wait takes the rack offer and preempts nobody...
    decision, _ = DALLY.decide(view(0, machines, *runners, fresh), DallyState(), NO_WAIT)
    assert decision.preempt == () and [s.tier for s in decision.start] == ["rack"]
    # ...while Dally refuses it (machine timer 12 h) and preempts r0 for a whole machine.
    decision, _ = DALLY.decide(view(0, machines, *runners, fresh), DallyState(), AUTO)
    assert decision.preempt == ("r0",)
    assert [(s.placement, s.tier) for s in decision.start] == [((("m000", 8),), "machine")]


@pytest.mark.parametrize("ulps", [-3, 0, 3])
def test_runners_equal_but_for_float_noise_are_ranked_by_job_id(ulps: int) -> None:
    # Found by the slow differential test: two 4-GPU gangs of one model on like
    # placements have one Nw_sens, a few ulps apart in one machinery and equal in
    # the other, which then preempted the other gang. Noise must not pick the victim.
    progress = 0.45
    for _ in range(abs(ulps)):
        progress = math.nextafter(progress, math.inf if ulps > 0 else -math.inf)
    machines = (slot("m000", "r00", 0), slot("m001", "r00", 0))
    a = job("a", 8, progress=0.45, executed_s=50, placement=(("m000", 8),))
    b = job("b", 8, progress=progress, executed_s=50, placement=(("m001", 8),))
    assert nw_sens(a) - nw_sens(b) == pytest.approx(0.0, abs=1e-15)
    decision, _ = DALLY.decide(view(0, machines, b, a, job("w", 8)), DallyState(), AUTO)
    assert decision.preempt == ("a",)


@pytest.mark.parametrize(
    ("margin", "runner_progress", "preempted"),
    [
        # Waiter at Nw_sens 0.9 (0.45 in 50 s of a 100 s ideal); the runner just above it.
        (0.0, 0.4502, ("r",)),  # 0.9004: higher, so preempted (the paper's rule)
        (0.001, 0.4502, ()),  # 0.04% higher: within the margin, spared
        (0.001, 0.4600, ("r",)),  # 2.2% higher: beyond it
    ],
)
def test_preempt_margin_spares_runners_barely_above(
    margin: float, runner_progress: float, preempted: tuple[str, ...]
) -> None:
    machines = (slot("m000", "r00", 0),)
    runner = job("r", 8, progress=runner_progress, executed_s=50, placement=(("m000", 8),))
    waiter = job("w", 8, progress=0.45, executed_s=50)
    params = DallyParams(timers="no-wait", preempt_margin=margin)
    decision, _ = DALLY.decide(view(0, machines, runner, waiter), DallyState(), params)
    assert decision.preempt == preempted


def test_a_runner_that_has_done_nothing_is_never_preempted() -> None:
    # Both at Nw_sens 0: "strictly higher" protects the runner that has just started.
    runner = job("r", 8, executed_s=1, placement=(("m000", 8),))
    decision, _ = DALLY.decide(view(0, FULL_RACK[:1], runner, job("w", 8)), DallyState(), AUTO)
    assert decision.preempt == () and decision.start == ()


# --- parameters -------------------------------------------------------------------------

BAD_PARAMS = [
    ({"machine_timer_s": -1.0}, "dally.machine_timer_s"),
    ({"rack_timer_s": math.inf}, "dally.rack_timer_s"),
    ({"machine_timer_s": 10.0, "rack_timer_s": 5.0}, "dally.rack_timer_s must be >="),
    ({"history_window_s": 0.0}, "dally.history_window_s"),
    ({"history_count_max": 0}, "dally.history_count_max"),
    ({"history_count_max": 10_001}, "dally.history_count_max"),
    ({"preempt_margin": -0.001}, "dally.preempt_margin"),
    ({"preempt_margin": math.nan}, "dally.preempt_margin"),
    ({"preempt_margin": 1.5}, "dally.preempt_margin"),
    ({"rank_resolution": -1e-4}, "dally.rank_resolution"),
    ({"rank_resolution": 2.0}, "dally.rank_resolution"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_PARAMS)
def test_params_are_validated_with_the_field_named(fields, message) -> None:
    with pytest.raises(ValueError, match=message):
        DallyParams(**fields)


def test_params_from_a_scenario_reject_unknown_fields_and_variants() -> None:
    assert msgspec.convert({"timers": "no-wait"}, DallyParams).timers == "no-wait"
    with pytest.raises(msgspec.ValidationError, match="timer"):
        msgspec.convert({"timer": "auto"}, DallyParams)
    with pytest.raises(msgspec.ValidationError, match="timers"):
        msgspec.convert({"timers": "forever"}, DallyParams)
    # Defaults are the paper's: 12 h machine timer, 24 h in all for the rack timer.
    assert (AUTO.machine_timer_s, AUTO.rack_timer_s) == (12 * 3_600.0, 24 * 3_600.0)


# --- end to end on the reference engine ---------------------------------------------------


def test_dally_pays_less_communication_than_no_wait_on_a_fragmented_cluster() -> None:
    """Dally's setup (8-GPU machines, 2 racks x 8 machines), comm model and preemption cost on.

    At t=0 sixteen 6-GPU ResNet-50 jobs (2 h) take one machine each, leaving 2 GPUs free on
    every machine. At 10, 20, 30 min an 8-GPU MobileNetV3 job (1 h) arrives: no machine has
    8 free, but four machines of a rack have 2 each, so the best offer is rack tier.
    MobileNetV3 at rack tier runs (1 + 9.40) / (1 + 0.42) = 7.32x slower: 60 min becomes
    439.4 min, of which 439.4 x (1 - 1/7.32) = 379.4 min is communication.
      - no-wait takes the rack offer each time: 3 x 379.4 min of communication.
      - Dally: the first two find no 8-GPU wait list (fewer than 2 samples: the 12 h
        timer), refuse the rack offer and preempt a filler (Nw_sens 0.90 > 0) for a whole
        machine: no communication. That records two 0 s machine waits for 8 GPUs, so the
        third gets timer 0 + 2 x 0 = 0 and takes the rack offer at once, like no-wait.
    The preempted fillers restart on 2+2+2 GPUs of a rack (6-GPU timer 0: sixteen 0 s
    waits), where ResNet-50 pays nothing extra (Table I: 12% at machine and at rack).
    """
    minute = 60 * S
    trace = [
        TraceJob(job_id=f"fill{i:02d}", submit_us=0, gpus=6, model="resnet50", duration_us=2 * H)
        for i in range(16)
    ] + [
        TraceJob(job_id=f"moby{i}", submit_us=(i + 1) * 10 * minute, gpus=8,
                 model="mobilenetv3", duration_us=H)
        for i in range(3)
    ]  # fmt: skip
    machines = cluster_of(16, 8, 8)
    runs = {
        name: {j.job_id: j for j in simulate(DALLY, params, trace, machines, Semantics()).jobs}
        for name, params in (("dally", AUTO), ("no-wait", NO_WAIT), ("full", FULL))
    }
    comm_min = {
        name: {job_id: round(j.comm_overhead_us / minute, 1) for job_id, j in run.items()}
        for name, run in runs.items()
    }
    assert all(j.finish_us is not None for run in runs.values() for j in run.values())
    moby = ("moby0", "moby1", "moby2")
    assert [comm_min["no-wait"][m] for m in moby] == [379.4, 379.4, 379.4]
    assert [comm_min["dally"][m] for m in moby] == [0.0, 0.0, 379.4]
    assert [comm_min["full"][m] for m in moby] == [0.0, 0.0, 0.0]
    assert sum(comm_min["dally"].values()) < sum(comm_min["no-wait"].values())
    fillers = [f"fill{i:02d}" for i in range(16)]
    assert all(comm_min[name][f] == 0.0 for name in runs for f in fillers)
    # One victim per MobileNet job that preempted: 2 under Dally, 3 when fully consolidated
    # (the fillers, all at the same Nw_sens, never preempt one another), none under no-wait.
    preempted = {name: sum(run[f].preemptions for f in fillers) for name, run in runs.items()}
    assert preempted == {"dally": 2, "no-wait": 0, "full": 3}
