"""The indexed mailbox against a brute-force scan of the arrival order, on generated histories.

Any receive must return exactly what scanning the waiting messages in arrival
order for the first match would (the kernel's first mailbox did that): the
trace of every run depends on it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.commands import Envelope
from emulator.mailbox import Mailbox
from tests.support.examples import examples


class ScanMailbox:
    """The oracle: a list scanned from the front."""

    def __init__(self) -> None:
        self.items: list[Envelope] = []

    def append(self, env: Envelope) -> None:
        self.items.append(env)

    def take(self, reply_to: int | frozenset[int]) -> Envelope | None:
        for i, env in enumerate(self.items):
            if (
                reply_to == 0
                or env.reply_to == reply_to
                or (isinstance(reply_to, frozenset) and env.reply_to in reply_to)
            ):
                return self.items.pop(i)
        return None


CORRS = st.integers(1, 6)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.one_of(st.just(0), CORRS)),
        st.tuples(st.just("take"), st.one_of(st.just(0), CORRS)),
        st.tuples(st.just("take-set"), st.frozensets(CORRS, min_size=1, max_size=3)),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=120,
)


@settings(max_examples=examples(250), deadline=None)
@given(OPS)
def test_every_receive_returns_what_a_scan_of_the_arrival_order_would(ops: list) -> None:
    fast, slow = Mailbox(), ScanMailbox()
    n = 0
    for op, arg in ops:
        if op == "put":
            n += 1
            env = Envelope("a", "b", "b", n, 0, 0, arg)
            fast.append(env)
            slow.append(env)
        elif op == "clear":
            fast.clear()
            slow.items.clear()
        else:
            assert fast.take(arg) is slow.take(arg)
        assert len(fast) == len(slow.items)
        assert bool(fast) is bool(slow.items)
    while slow.items:
        assert fast.take(0) is slow.take(0)
    assert fast.take(0) is None and len(fast) == 0


def test_a_reply_taken_out_of_order_is_not_handed_out_again() -> None:
    box = Mailbox()
    first, reply, last = (Envelope("a", "b", "b", m, 0, 0, r) for m, r in ((1, 0), (2, 7), (3, 0)))
    for env in (first, reply, last):
        box.append(env)
    assert box.take(7) is reply
    assert [box.take(0), box.take(0), box.take(0)] == [first, last, None]
