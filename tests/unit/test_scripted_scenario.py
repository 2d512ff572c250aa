"""`actors.mast.scripted.scenario` hands each caller its own scenario to change."""

from __future__ import annotations

from actors.mast.scripted import CHECKERS, scenario


def test_a_checker_added_to_one_scenario_is_not_in_the_next() -> None:
    # The checker list was the module's own: a test that added `progress` to its
    # scenario added it to every later one (the zoo's witness files then differed
    # from their builders when such a test ran first in the same process).
    first = scenario([])
    first["invariants"]["enabled"].append("storage")
    assert scenario([])["invariants"]["enabled"] == CHECKERS
    assert "storage" not in CHECKERS
