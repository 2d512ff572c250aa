"""The team's suite: smallest-first, run under mastemu, judged by its own invariant.

`mastemu` is the fixture mastemu's pytest plugin provides (installed with
mastemu, nothing to import); runs go to the test's tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest
from smallest_first.policy import SmallestFirst

from actors.extend import JobView, register_cluster_policy, unregister_cluster_policy
from emulator.testing import MastemuFixture, assert_clean, assert_eventually, assert_never

SCENARIO = "smallest-first-demo"  # this package's scenario folder, through its plugin


@pytest.mark.mastemu_seeds(1, 3)
def test_every_job_finishes_and_no_small_job_is_passed_over(mastemu: MastemuFixture) -> None:
    run = mastemu.run(SCENARIO)
    assert_clean(run)  # includes smallest-first-order, enabled in the scenario
    done = {e.job for e in run.events(kind="decision", type="cluster.job-done")}
    assert len(done) == 40


def test_a_lone_16_gpu_job_starts_at_once(mastemu: MastemuFixture) -> None:
    run = mastemu.run(
        SCENARIO,
        **{
            "system.workload.philly.arrivals.num_jobs": 1,
            "system.workload.philly.gpu_counts": [16],
            "system.workload.philly.gpu_weights": [1.0],
        },
    )
    assert_clean(run)
    started = assert_eventually(
        run, lambda e: e.type == "cluster.decision" and e.start, within=5_000_000
    )
    assert len(started.start) == 1


def test_never_preempts(mastemu: MastemuFixture) -> None:
    run = mastemu.run(SCENARIO, **{"system.machines": 2})
    assert_clean(run)
    assert_never(run, lambda e: e.type == "cluster.decision" and e.preempt)


class LargestFirst(SmallestFirst):
    """A deliberately broken variant: the order reversed, the promise broken."""

    name: ClassVar[str] = "largest-first-broken"

    def order(self, job: JobView) -> tuple[int, int, str]:
        return (-job.gpus, job.submit_us, job.job_id)


@pytest.fixture
def broken() -> Iterator[str]:
    register_cluster_policy(LargestFirst())
    yield LargestFirst.name
    unregister_cluster_policy(LargestFirst.name)


def test_the_invariant_catches_a_policy_that_breaks_the_promise(
    mastemu: MastemuFixture, broken: str
) -> None:
    run = mastemu.run(SCENARIO, **{"system.policy": broken})
    assert [v.invariant for v in run.violations][:1] == ["smallest-first-order"]
    with pytest.raises(AssertionError, match="smallest-first-order"):
        assert_clean(run)
    code, text = run.check()  # the same checker, offline, over the stored trace
    assert code == 1 and "VIOLATION smallest-first-order" in text
