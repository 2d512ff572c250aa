"""Link streams in bounded memory draw exactly what one stream per link kept forever draws."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.net.links import LinkStreams
from emulator.rng import RngStreams

HOSTS = ("a", "b", "c", "d", "e")

# A sequence of draws: which link, and how many numbers at once (a message's
# jitter, then perhaps a loss and a duplicate draw under a fault rule).
draws = st.lists(
    st.tuples(st.sampled_from(HOSTS), st.sampled_from(HOSTS), st.integers(1, 3)),
    max_size=300,
)


@settings(max_examples=60, deadline=None)
@given(draws, st.integers(1, 6), st.integers(0, 2**31))
def test_evicted_links_draw_what_kept_ones_would(seq, live_max: int, seed: int) -> None:
    oracle = RngStreams(seed)  # one stream per link, never dropped
    bounded = LinkStreams(RngStreams(seed), live_max)
    for src, dst, n in seq:
        expected = [oracle.stream("link", src, dst).random() for _ in range(n)]
        stream = bounded(src, dst)
        assert [stream.random() for _ in range(n)] == expected
        assert len(bounded) <= live_max


def test_a_busy_link_survives_many_short_lived_ones() -> None:
    links = LinkStreams(RngStreams(7), live_max=4)
    busy = links("rms", "cm")
    for i in range(100):
        busy = links("rms", "cm")  # used between every newcomer: the most recent
        busy.random()
        links(f"agent{i}", "cm").random()
    assert links("rms", "cm") is busy and links.rebuilt == 0
    links("agent0", "cm")  # long evicted: rebuilt from its name, one draw on
    assert links.rebuilt == 1


def test_the_live_bound_is_checked() -> None:
    with pytest.raises(ValueError, match="live_max"):
        LinkStreams(RngStreams(1), 0)
