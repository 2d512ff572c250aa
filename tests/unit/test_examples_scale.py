"""`MASTEMU_EXAMPLES` scales every property test's examples, and a bad value stops the session."""

from __future__ import annotations

import pytest

from tests.support.examples import examples


def test_unset_keeps_the_count_and_a_scale_multiplies_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MASTEMU_EXAMPLES", raising=False)
    assert examples(150) == 150
    monkeypatch.setenv("MASTEMU_EXAMPLES", "20")
    assert examples(150) == 3000
    monkeypatch.setenv("MASTEMU_EXAMPLES", "0.1")
    assert examples(4) == 1  # never none


@pytest.mark.parametrize("raw", ["many", "0", "-3", "1e9", "nan"])
def test_a_value_that_is_no_sane_scale_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("MASTEMU_EXAMPLES", raw)
    with pytest.raises(pytest.UsageError, match="MASTEMU_EXAMPLES"):
        examples(10)
