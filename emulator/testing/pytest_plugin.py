"""The pytest plugin (entry point `pytest11`): the `mastemu` fixture and `mastemu_seeds`.

    def test_gms_failover_dispatches_once(mastemu):
        run = mastemu.run("gms-failover", **{"system.load": 3})
        assert_clean(run)

    @pytest.mark.mastemu_seeds(1, 20)
    def test_chaos_is_clean(mastemu):
        assert_clean(mastemu.run("chaos"))     # once per seed 1..20

`mastemu.run(SCENARIO, seed=None, until=None, **overrides)` runs into the
test's `tmp_path` (see `emulator.testing.runs.run_scenario`); under
`mastemu_seeds(first, last)` the test runs once per seed and `run` takes
that seed unless given one. A failing seeded test names its seed and the
command that reproduces each run it made.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.testing.fixture import MastemuFixture

MARKER = "mastemu_seeds"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(first, last): run the test once per seed first..last with the mastemu fixture",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    first, last = (int(x) for x in marker.args)
    if not 0 <= first <= last:
        raise pytest.UsageError(f"{MARKER}({first}, {last}): seeds must run up, from 0")
    if "mastemu" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.function.__name__}: {MARKER} needs the mastemu fixture")
    # Parametrizing the fixture itself: each seed is one `mastemu` fixture.
    seeds = list(range(first, last + 1))
    metafunc.parametrize("mastemu", seeds, indirect=True, ids=lambda s: f"seed{s}")


@pytest.fixture
def mastemu(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MastemuFixture]:
    seed: int | None = getattr(request, "param", None)
    fixture = MastemuFixture(tmp_path, seed)
    request.node.stash[_RUNS] = fixture
    yield fixture


_RUNS = pytest.StashKey[MastemuFixture]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    fixture = item.stash.get(_RUNS, None)
    if report.failed and call.when == "call" and fixture is not None and fixture.runs:
        lines = [f"seed {fixture.seed}" if fixture.seed is not None else "runs made:"]
        lines += [f"reproduce: {run.reproduce}" for run in fixture.runs]
        report.sections.append(("mastemu", "\n".join(lines)))
    return report
