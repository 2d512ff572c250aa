"""bench bugzoo: random seeds and explore against a seeded bug, CPU seconds to a failure."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli


def test_both_searches_find_a_shallow_bug_and_the_json_has_the_issue_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(
        capsys, "bench", "bugzoo", "--bugs", "gms-quota-ignores-running", "--budget-s", "20",
        "--repetitions", "1", "--json",
    )  # fmt: skip
    report = json.loads(out)
    (row,) = report["bugs"]
    assert row["name"] == "gms-quota-ignores-running" and row["depth"] == "shallow"
    assert row["random_found"] == row["explore_found"] == 1
    assert 0 < row["random_s"] < 20 and 0 < row["explore_s"] < 20
    assert report["random"]["found"] == report["explore"]["found"] == 1
    assert report["speedup_median"] == pytest.approx(row["random_s"] / row["explore_s"], rel=0.01)
    assert code == 0


def test_an_unknown_bug_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "bench", "bugzoo", "--bugs", "no-such-bug", "--json")
    assert code == 2 and "unknown bug 'no-such-bug'" in err
