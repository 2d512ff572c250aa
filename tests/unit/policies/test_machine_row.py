"""`MachineRow`: a snapshot's machines, sharing chunks between snapshots, equal to a tuple."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.policies.mast.placement.machines import CHUNK, MachineRow
from actors.policies.mast.placement.snapshot import ClusterSnapshot, MachineState
from tests.support.examples import examples


def state(i: int, free: int = 8) -> MachineState:
    return MachineState(
        host=f"h{i:05d}",
        rack=f"r{i // 16}",
        gpu_type="A100",
        gpus_total=8,
        gpus_free=free,
        cpu_free=False,
        healthy=True,
    )


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(0, 3 * CHUNK + 5),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 8)), max_size=20),
)
def test_a_patched_row_equals_the_tuple_patched_the_same_way(n: int, edits) -> None:  # type: ignore[no-untyped-def]
    flat = [state(i) for i in range(n)]
    row = MachineRow.of(flat)
    at = [i % n for i, _ in edits] if n else []
    new = [state(i % n, free) for i, free in edits] if n else []
    patched = row.patched(at, new)
    for i, s in zip(at, new, strict=True):
        flat[i] = s
    assert patched == tuple(flat) and tuple(flat) == patched
    assert list(patched) == flat and len(patched) == n
    assert hash(patched) == hash(tuple(flat))
    assert all(patched[i] is flat[i] for i in range(n))
    assert row == tuple(state(i) for i in range(n))  # the row patched is left as it was


def test_indexing_slicing_and_comparison_behave_as_a_tuple() -> None:
    row = MachineRow.of(state(i) for i in range(CHUNK + 3))
    assert row[-1] == state(CHUNK + 2) and row[CHUNK] == state(CHUNK)
    assert row[2:5] == tuple(state(i) for i in range(2, 5))
    with pytest.raises(IndexError):
        row[CHUNK + 3]
    assert row != list(row)  # as a tuple: never equal to a list
    assert row != MachineRow.of(state(i) for i in range(CHUNK + 2))
    assert MachineRow.of([]) == ()


@pytest.mark.parametrize(
    ("at", "states", "error"),
    [
        ([0, 1], [state(0)], ValueError),
        ([5], [state(5)], IndexError),
        ([-1], [state(0)], IndexError),
    ],
)
def test_a_bad_patch_is_refused(at: list[int], states: list[MachineState], error: type) -> None:
    with pytest.raises(error):
        MachineRow.of(state(i) for i in range(5)).patched(at, states)


def test_a_patch_shares_the_chunks_it_did_not_change() -> None:
    row = MachineRow.of(state(i) for i in range(4 * CHUNK))
    patched = row.patched([CHUNK + 1], [state(CHUNK + 1, 0)])
    assert [a is b for a, b in zip(row._chunks, patched._chunks, strict=True)] == [
        True,
        False,
        True,
        True,
    ]


def test_a_snapshot_with_a_row_equals_one_with_the_tuple() -> None:
    states = [state(i) for i in range(3)]
    a = ClusterSnapshot(cluster_id="c", machines=MachineRow.of(states))
    b = ClusterSnapshot(cluster_id="c", machines=tuple(states))
    assert a == b and b == a and hash(a) == hash(b)
