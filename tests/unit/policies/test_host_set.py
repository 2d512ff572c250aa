"""`HostSet`: a frozen base plus recent changes behaves as the plain set it stands for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.policies.mast.placement.overlay import FOLD_AFTER, HostSet
from tests.support.examples import examples

HOSTS = [f"h{i}" for i in range(40)]


def test_changes_add_and_remove_members() -> None:
    s = HostSet({"a", "b"})
    t = s.with_changes({"a": False, "c": True})
    assert "a" in s and "a" not in t
    assert "c" in t and "c" not in s
    assert "b" in t
    assert t == {"b", "c"} and s == {"a", "b"}  # the old value is untouched
    assert len(t) == 2 and sorted(t) == ["b", "c"]


def test_many_changes_fold_into_the_base() -> None:
    s = HostSet(f"x{i}" for i in range(4 * FOLD_AFTER))
    for i in range(FOLD_AFTER + 1):
        s = s.with_changes({f"x{i}": False})
    assert len(s.delta) < FOLD_AFTER  # folded at least once: the delta stays bounded
    assert s == {f"x{i}" for i in range(FOLD_AFTER + 1, 4 * FOLD_AFTER)}


@settings(max_examples=examples(100), deadline=None)
@given(
    st.frozensets(st.sampled_from(HOSTS)),
    st.lists(st.dictionaries(st.sampled_from(HOSTS), st.booleans(), max_size=12), max_size=30),
)
def test_equals_a_plain_set_under_any_changes(base: frozenset[str], steps: list) -> None:
    s, plain = HostSet(base), set(base)
    for changes in steps:
        s = s.with_changes(changes)
        plain = (plain | {h for h, v in changes.items() if v}) - {
            h for h, v in changes.items() if not v
        }
        assert all((h in s) == (h in plain) for h in HOSTS)
    assert s.frozen() == plain
