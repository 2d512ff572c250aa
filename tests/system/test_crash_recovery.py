"""mast under actor crashes: scripted stories where a leader is down at the wrong moment.

Each story is one a seeded crash nemesis found (ras-fault-domain without RAS,
quickstart); each failed before its fix and is told here on the tiny worlds
of `tests/support/dsl.py`: one region, one or two dynamic clusters, tenants
`hi` (priority 1) and `lo` (priority 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emulator.units import MIN
from tests.support.dsl import job, preemption_story, scenario, states, workload
from tests.support.dsl import run as mast_run
from tests.support.trace import decisions, events_of, store_events

LONG = 600 * MIN
SHORT = 3 * MIN


def run(raw: dict[str, Any], tmp_path: Path) -> Any:
    """These stories are about a role's only instance: no follower takes over."""
    raw["system"]["replicas"] = {"gms": 1, "rms": 1, "cm": 1}
    return mast_run(raw, tmp_path)


def crash(target: str, at: str, restart_after: str) -> dict[str, Any]:
    return {"action": "crash", "at": at, "target": target, "restart_after": restart_after}


def two_clusters(raw: dict[str, Any]) -> dict[str, Any]:
    """Split each region in two clusters of 2 GPU machines (16 GPUs) and 2 CPU machines."""
    raw["system"]["world_model"]["clusters_per_region"] = 2
    for region in raw["system"]["world_model"]["regions"]:
        region.update(fault_domains=2, machines_per_rack=2)
    return raw


def split_gang_story(*faults: dict[str, Any]) -> dict[str, Any]:
    """G's trainer can only go to east/c0 and its preprocess job only to east/c1.

    X (long preprocess, short trainer) and Z fill both clusters at first; when
    X's trainer ends, east/c0 has free GPUs but no CPU machine, east/c1 free CPU
    machines but no GPU. G (short jobs) arrives at 30 min.
    """
    raw = scenario(
        [
            workload("X", "lo", 0, job(gpus=16, work=15 * MIN), job("prep", cpus=2, work=LONG)),
            workload("Z", "lo", 0, job(gpus=16, work=LONG)),
            workload("G", "hi", 30 * MIN, job(gpus=8, work=SHORT), job("prep", cpus=2, work=SHORT)),
        ],
        regions=("east",),
        duration="2h",
    )
    raw["faults"] = list(faults)
    return two_clusters(raw)


def starts(events: list[Any], wid: str) -> dict[str, tuple[float, str]]:
    """Job → (minute, cluster) of its last start."""
    return {
        e.job_name: (e.t_us / MIN, e.cluster)
        for e in store_events(events, "fleet.start", wid)
        if e.result
    }


def releases(events: list[Any], wid: str) -> list[tuple[float, str, str]]:
    """(minute, job, STOPPED or DONE) of each release of the workload's jobs."""
    return [
        (e.t_us / MIN, e.job_name, e.state)
        for e in store_events(events, "fleet.release", wid)
        if e.result
    ]


# ---- the job agent's reports survive a CM that is down -------------------------------------
def test_agent_a_job_that_finishes_while_its_cm_is_down_ends_done_and_is_never_preempted(
    tmp_path: Path,
) -> None:
    # J (20 min of work) finishes while east/c0's CM is down (15 min to 35 min).
    # Its agent's report used to be lost: the restarted CM believed J still ran,
    # H preempted the finished job at 1 h, and J ran a second time.
    raw = scenario(
        [
            workload("J", "lo", 0, job(gpus=32, work=20 * MIN)),
            workload("H", "hi", 60 * MIN, job(gpus=16, work=10 * MIN)),
        ],
        regions=("east",),
        duration="2h",
    )
    raw["faults"] = [crash("leader of cm/east/c0", "15m", "20m")]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    assert [(job_, state) for _, job_, state in releases(events, "J")] == [("trainer", "DONE")]
    (done,) = releases(events, "J")
    assert 35 <= done[0] < 36  # reported to the CM as soon as it is back
    assert len(store_events(events, "fleet.start", "J")) == 1
    assert states(result) == {"J": ("DONE", 0), "H": ("DONE", 0)}
    assert not [d for d in decisions(events, "rms.dispatch") if d["victims"]]


# ---- gang: nothing trains before the whole gang holds machines -----------------------------
def test_gang_a_job_waits_to_train_until_a_down_cm_has_started_the_rest_of_its_gang(
    tmp_path: Path,
) -> None:
    # east/c1's CM is down from 29 to 41 min. G's trainer (east/c0) used to run
    # its 3 minutes and end before its preprocess job (east/c1) even started.
    result, events = run(split_gang_story(crash("leader of cm/east/c1", "29m", "12m")), tmp_path)
    assert result.violations == []
    g = starts(events, "G")
    assert g["trainer"][1] == "east/c0" and g["prep"][1] == "east/c1"
    assert 30 <= g["trainer"][0] < 31 and 41 <= g["prep"][0] < 42
    # The trainer was set up at once but trained only from 41 min: 3 min of work.
    (trainer_done,) = [t for t, j, s in releases(events, "G") if j == "trainer"]
    assert trainer_done > g["prep"][0] + 3
    assert states(result)["G"] == ("DONE", 0)


def test_rms_a_job_lost_before_its_gang_started_fails_the_dispatch(tmp_path: Path) -> None:
    # G's trainer waits (set up, not training) for its preprocess job, whose CM
    # is down until 41 min; at 35 min the rack of east/c0's GPU machines fails
    # and the trainer, with no spare, is lost. The RMS used to ignore the news
    # of a job whose dispatch was not settled, and reported G RUNNING whole.
    raw = split_gang_story(crash("leader of cm/east/c1", "29m", "12m"))
    raw["faults"].append(
        {"action": "down", "at": "35m", "node": "east/dc0/fd0/r0", "duration": "20m"}
    )
    result, events = run(raw, tmp_path)
    assert result.violations == []
    # The preprocess job started late is stopped, and only then does G go back
    # to the queue; it is dispatched again (whole) at once.
    assert [(round(t), j, s) for t, j, s in releases(events, "G")][:2] == [
        (35, "trainer", "STOPPED"),
        (41, "prep", "STOPPED"),
    ]
    moves = [
        (round(e.now_us / MIN), e.to_state)
        for e in store_events(events, "queue.transition", "G")
        if e.result
    ]
    assert moves == [(41, "PENDING"), (42, "RUNNING"), (49, "DONE")]


def test_rms_restarting_mid_dispatch_rolls_back_a_half_started_gang(tmp_path: Path) -> None:
    # east/c1's CM is down (29-41 min) when G is awarded (30 min), so only its
    # trainer is placed; the RMS crashes at 31 min and with it the plan it kept
    # resending to east/c1. The restarted RMS used to adopt the half gang as
    # running: it must roll it back, so that G is dispatched again, whole.
    result, events = run(
        split_gang_story(
            crash("leader of cm/east/c1", "29m", "12m"), crash("leader of rms/east", "31m", "2m")
        ),
        tmp_path,
    )
    assert result.violations == []
    assert next((j, s) for _, j, s in releases(events, "G")) == ("trainer", "STOPPED")
    back = [
        e
        for e in store_events(events, "queue.transition", "G")
        if e.result and e.to_state == "PENDING"
    ]
    assert len(back) == 1 and 33 <= back[0].now_us / MIN < 34  # once the trainer stopped
    assert {job_ for job_ in starts(events, "G")} == {"trainer", "prep"}
    assert states(result)["G"] == ("DONE", 0)


def test_cm_a_plan_resent_after_its_dispatch_was_given_up_starts_nothing(tmp_path: Path) -> None:
    # east/c1's CM is down for 20 min: the RMS gives G's first dispatch up after
    # its 15 min timeout and G is dispatched again. When the CM is back, both
    # dispatches' plans for G's preprocess job reach it: only the second runs.
    # (Which comes first depends on the two resends' phases: the first is refused
    # as no longer awarded if it comes first, as a job already running if not.)
    result, events = run(split_gang_story(crash("leader of cm/east/c1", "29m", "20m")), tmp_path)
    assert result.violations == []
    assert len(store_events(events, "fleet.start", "G")) == 3  # trainer twice, prep once
    results = [e.msg["msg"] for e in events_of(events, "deliver", "PlanResult")]  # reliable
    prep = {
        (m["auction_id"], m["ok"]) for m in results if (m["workload_id"], m["job"]) == ("G", "prep")
    }
    assert prep == {(3, False), (4, True)}
    assert states(result)["G"] == ("DONE", 0)


# ---- a preemption survives a restart of the CM that began it -------------------------------
def test_cm_restarted_mid_preemption_reports_the_victim_preempted(tmp_path: Path) -> None:
    # L (priority 5) fills east; H preempts it at 60 min. The CM orders L's
    # checkpoint and crashes 10 s later, for 2 min. The restarted CM used to
    # forget the order and report L "failed" (not preempted) when its agent's
    # stop report arrived.
    raw = preemption_story(duration="3h")
    raw["faults"] = [crash("leader of cm/east/c0", "60m20s", "2m")]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    stopped = next(t for t, j, s in releases(events, "L") if s == "STOPPED")
    assert 62 <= stopped < 63  # when the CM is back
    saved = [e for e in store_events(events, "fleet.checkpoint", "L") if e.result]
    assert any(60 <= e.t_us / MIN < stopped for e in saved)
    requeued = next(
        e
        for e in store_events(events, "queue.transition", "L")
        if e.result and e.to_state == "PENDING"
    )
    assert requeued.preempted is True  # counted as a preemption


# ---- a leader whose lease lapsed while it was paused ---------------------------------------
def test_cm_paused_past_its_lease_renews_it_before_freeing_a_finished_jobs_machines(
    tmp_path: Path,
) -> None:
    # J's agent reports it finished (at 21 m 51 s) to a CM paused from 21 m 45 s
    # for 2 min, longer than its 30 s lease. Woken, the CM handled the report
    # before its renewal timer: the store refused the release under the lapsed
    # epoch, yet the CM told the RMS the job had ended, and J went DONE while
    # its machines stayed allocated for good.
    raw = scenario([workload("J", "lo", 0, job(gpus=32, work=20 * MIN))], regions=("east",))
    raw["duration"] = "1h"
    raw["faults"] = [
        {"action": "pause", "at": "1305s", "target": "leader of cm/east/c0", "duration": "2m"}
    ]
    result, events = run(raw, tmp_path)
    assert result.violations == []
    (release,) = store_events(events, "fleet.release", "J")
    assert release.result is True and release.state == "DONE"
    leaders = [d for d in decisions(events, "lease.leader") if d["role"] == "cm/east/c0"]
    assert [d["epoch"] for d in leaders] == [1, 2]
    assert states(result)["J"] == ("DONE", 0)
