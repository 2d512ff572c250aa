"""The cluster view's snapshots: rebuilt only where changed, equal to one built from scratch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.common.cm.ledger import ClusterLedger
from actors.policies.mast.placement.capacity import ClusterIndex, has_index, index_of
from actors.policies.mast.placement.snapshot import ClusterSnapshot, MachineState, RunningJob
from store.mast.fleet import Allocation, JobRow
from store.mast.records import GPUS_PER_MACHINE, Machine
from tests.support.examples import examples
from tests.support.placement_index import index_state

HOSTS = [f"r{i % 3}/m{i}" for i in range(10)]
STRAY = "elsewhere/m99"  # a plan's host this cluster does not have


def machines() -> list[tuple[Machine, bool]]:
    return [
        (
            Machine(
                host=h,
                region="x",
                rack=h.split("/")[0],
                fault_domain="fd",
                gpu_type="A100" if i % 4 else None,
                gpus=GPUS_PER_MACHINE if i % 4 else 0,
                cluster="c",
            ),
            i != 7,
        )
        for i, h in enumerate(HOSTS)
    ]


def held_counts(view: ClusterLedger) -> tuple[dict[str, int], dict[str, int]]:
    """GPUs used and CPU holders per host, counted from the jobs' own records."""
    gpus: dict[str, int] = {}
    cpus: dict[str, int] = {}
    for held in view.jobs.values():
        for host, n in held.gpus.items():
            gpus[host] = gpus.get(host, 0) + n
        for host in held.cpu_hosts:
            cpus[host] = cpus.get(host, 0) + 1
    return gpus, cpus


def from_scratch(view: ClusterLedger) -> ClusterSnapshot:
    """The snapshot as the first version of `ClusterLedger.snapshot` built it, every time.

    What the jobs hold is counted afresh from their records, not read from
    the ledger's own counters (which the rebuild reads). A job some entry
    claims as its plan's victim is in no snapshot.
    """
    used, busy = held_counts(view)
    claimed = {victim for held in view.jobs.values() for victim in held.claims}
    return ClusterSnapshot(
        cluster_id=view.cluster,
        machines=tuple(
            MachineState(
                host=host,
                rack=m.rack,
                gpu_type=m.gpu_type,
                gpus_total=m.gpus,
                gpus_free=max(0, m.gpus - used.get(host, 0)),
                cpu_free=m.gpus == 0 and host not in busy,
                healthy=view.healthy[host],
            )
            for host, m in sorted(view.machines.items())
        ),
        running=tuple(
            RunningJob(
                workload_id=w,
                job=j,
                priority=held.priority,
                started_at_us=held.started_us,
                gpus=tuple(sorted(held.gpus.items())),
                cpu_hosts=tuple(sorted(held.cpu_hosts)),
            )
            for (w, j), held in sorted(view.jobs.items())
            if (w, j) not in claimed
        ),
    )


keys = st.tuples(st.sampled_from(("w1", "w2", "w3")), st.sampled_from(("a", "b")))
ops = st.one_of(
    st.tuples(
        st.just("allocate"),
        keys,
        st.integers(0, 7),
        st.lists(st.tuples(st.sampled_from([*HOSTS, STRAY]), st.integers(1, 4)), max_size=3),
        st.lists(st.sampled_from([*HOSTS, STRAY]), max_size=3),
        st.lists(keys, max_size=2),  # the victims it claims
    ),
    st.tuples(st.just("release"), keys),
    st.tuples(st.just("health"), st.lists(st.sampled_from(HOSTS), max_size=3), st.booleans()),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("index")),
    st.tuples(st.just("reload")),
)


def reload(view: ClusterLedger) -> ClusterLedger:
    """The view an RMS reads back from the store at a scan, taking over from `view`."""
    allocations = [
        Allocation(host, w, j, n, False, 0)
        for (w, j), held in view.jobs.items()
        for host, n in held.gpus.items()
    ] + [
        Allocation(host, w, j, 0, True, 0)
        for (w, j), held in view.jobs.items()
        for host in held.cpu_hosts
    ]
    rows = [
        JobRow(
            workload_id=w,
            job=j,
            cluster="c",
            attempt=1,
            state="RUNNING",
            priority=held.priority,
            checkpoint_us=0,
            started_us=held.started_us,
            cm_epoch=1,
        )
        for (w, j), held in view.jobs.items()
    ]
    health = [(m, view.healthy[h]) for h, m in view.machines.items()]
    fresh = ClusterLedger.load("c", health, sorted(allocations, key=lambda a: a.host), rows)
    fresh._adopt(view)
    return fresh


def check(view: ClusterLedger) -> None:
    snap = view.snapshot()
    assert snap == from_scratch(view)
    # What the ledger keeps per machine about usability agrees with its maps.
    for host in view.machines:
        assert view.usable(host) == (view.healthy[host] and host not in view.transit)
    used, busy = held_counts(view)
    for host in [*HOSTS, STRAY]:
        assert view.gpus_used_on(host) == used.get(host, 0)
        assert view.cpu_holders(host) == busy.get(host, 0)
    assert {h: n for h, n in view.gpus_used.items() if n} == {h: n for h, n in used.items() if n}
    assert view.cpu_busy == busy
    if has_index(snap):  # derived from the last one: equal to a fresh build
        assert index_state(index_of(snap)) == index_state(ClusterIndex.build(snap))
    assert index_of(snap) is not None  # the next snapshot's index derives from this one


def caught(view: ClusterLedger, what: str) -> None:
    """`check` must fail on `view` (a deliberately broken ledger made it)."""
    try:
        check(view)
    except AssertionError:
        return
    raise AssertionError(f"{what} went unnoticed")


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(ops, max_size=30))
def test_snapshot_equals_a_rebuild_after_any_changes(steps) -> None:
    view = ClusterLedger("c", machines())
    for step in steps:
        if step[0] == "allocate":
            _, key, priority, gpus, cpus, claims = step
            view.allocate(key, priority, 5, gpus, cpus, claims)
        elif step[0] == "release":
            view.release(step[1])
        elif step[0] == "health":
            view.set_health(step[1], step[2])
        elif step[0] == "index":
            assert index_of(view.snapshot()) is not None
        elif step[0] == "reload":
            view = reload(view)
        else:
            check(view)
    check(view)
    snap = view.snapshot()
    assert view.snapshot() is snap  # cached until the next change


def test_a_hold_ended_before_any_other_change_gives_back_the_snapshot_before_it() -> None:
    view = ClusterLedger("c", machines())
    before = view.snapshot()
    index_of(before)
    view.allocate(("w1", "held"), 0, 5, [("r0/m1", 3)], ["r0/m0", "r1/m4"])
    held = view.snapshot()
    check(view)
    view.release(("w1", "held"))
    assert view.snapshot() is before  # index and all: nothing is rebuilt
    check(view)
    view.allocate(("w1", "held"), 0, 5, [("r0/m1", 3)], ["r0/m0", "r1/m4"])
    assert view.snapshot() is held  # and forward again
    check(view)


def _reverted_on_keys_alone(self, before, replaced, jobs_replaced) -> bool:  # type: ignore[no-untyped-def]
    """A broken `_reverted`: the same machines and jobs changed, whatever their states."""
    _, hosts, jobs, keys = before
    if hosts.keys() != replaced.keys() or jobs.keys() != jobs_replaced.keys():
        return False
    for host, state in hosts.items():
        self._restore(host, state)
    for key, job in jobs.items():
        if job is not None:
            self._running[key] = job
    self._run_keys = keys
    return True


def _other_hold_on_the_same_machines(view: ClusterLedger) -> None:
    view.snapshot()
    view.allocate(("w1", "a"), 0, 5, [("r0/m1", 3)], [])
    view.snapshot()
    # The hold ends and another takes the same machines in other amounts:
    # the same machines and the same job key changed, but not back.
    view.release(("w1", "a"))
    view.allocate(("w1", "a"), 0, 5, [("r0/m1", 5)], [])


def test_other_changes_to_the_same_machines_are_not_taken_for_a_return() -> None:
    view = ClusterLedger("c", machines())
    _other_hold_on_the_same_machines(view)
    check(view)


def test_a_return_judged_on_which_machines_changed_alone_is_caught(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(ClusterLedger, "_reverted", _reverted_on_keys_alone)
    view = ClusterLedger("c", machines())
    _other_hold_on_the_same_machines(view)
    caught(view, "a snapshot that does not match the ledger")


def test_a_change_that_forgets_to_list_its_machine_for_the_rebuild_is_caught(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # A health change whose machine is never remade: the snapshot keeps it usable.
    monkeypatch.setattr(ClusterLedger, "_touch", lambda self, slot: None)
    view = ClusterLedger("c", machines())
    view.snapshot()
    view.set_health(["r0/m0"], False)
    caught(view, "a machine left out of the rebuild")


def test_a_release_that_leaves_a_machine_counted_is_caught(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The counters are checked against the jobs' own records, not against themselves.
    view = ClusterLedger("c", machines())
    view.allocate(("w1", "a"), 3, 5, [("r0/m1", 3)], ["r0/m0"])
    view.snapshot()
    real = ClusterLedger.release

    def keeps_counts(self: ClusterLedger, key: tuple[str, str]):  # type: ignore[no-untyped-def]
        held = self.jobs.get(key)
        gpus = dict(held.gpus) if held else {}
        result = real(self, key)
        for host, n in gpus.items():  # put the GPUs back, as a release that forgot them
            self.allocate(("ghost", "x"), 0, 0, [(host, n)], [])
            self.jobs.pop(("ghost", "x"))
        return result

    monkeypatch.setattr(ClusterLedger, "release", keeps_counts)
    view.release(("w1", "a"))
    caught(view, "GPUs counted for a released job")


def test_a_claim_that_ends_without_giving_its_victim_back_is_caught(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    view = ClusterLedger("c", machines())
    view.allocate(("w1", "a"), 3, 5, [("r0/m1", 8)], [])
    view.allocate(("w2", "held"), 0, 5, [("r0/m1", 4)], [], [("w1", "a")])
    check(view)  # w1/a claimed: in no snapshot
    real = ClusterLedger.release

    def forgets_victims(self: ClusterLedger, key: tuple[str, str]):  # type: ignore[no-untyped-def]
        held = self.jobs.get(key)
        if held is not None:
            held.claims = ()  # the claim's end is not passed on to its victims
        return real(self, key)

    monkeypatch.setattr(ClusterLedger, "release", forgets_victims)
    view.release(("w2", "held"))
    caught(view, "a victim kept out after its claim ended")
