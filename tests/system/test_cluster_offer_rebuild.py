"""A cluster scheduler that finds itself leading a new epoch while answering an offer.

explore found it (`tiresias-philly`, search seed 44, shrunk to one pause of the
scheduler's leader from 3m04s for 4m35s, past its lease). Back, it handled the
agent's late `OfferReply`: it checked the offer was still open, then asked whether
it led, which rebuilt its state from the store for the new epoch (offers
included) and the reply's `del self.offers[...]` raised KeyError: the scheduler
crashed. It now asks whether it leads before it reads its offers.

Behind the crash hid a wrong result. The rebuild met the jobs that had ended during
the pause one by one, in trace order, and judged after each whether every job had
ended, over the accounts rebuilt so far: the first eight. It ended the run as done
at 7m39s, `status: ok`, with 472 of the trace's 480 jobs never run. The rebuild
now records those ends once every account is back.

And a leader's store must hold what it decided: a preemption that only withdrew
a start deferred to a stop was not saved, and the next leader rebuilt that
start (explore: `dally-racks`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from emulator.units import MIN
from tests.support.builtin import raw_builtin, run_raw
from tests.support.paths import DATA
from tests.support.trace import decision_events


def test_an_offer_reply_handled_as_a_new_epoch_begins_does_not_crash_the_scheduler(
    tmp_path: Path,
) -> None:
    raw = raw_builtin("tiresias-philly")
    raw["system"]["policy"] = "tiresias-las"
    raw["invariants"]["stop_on_violation"] = True
    raw["faults"] = [
        {
            "action": "pause",
            "at": "3m4.216926s",
            "target": "leader of rms/dc",
            "duration": "4m35.016069s",
        }
    ]
    result, events = run_raw(raw, tmp_path / "run.db")
    assert [e for e in events if e.kind == "actor-error"] == []
    assert result.status == "ok" and result.violations == []
    # The story: the scheduler rebuilt for its new epoch after the pause, and ran
    # every job of the trace to its end.
    assert any(e.t_us > 7 * MIN for e in decision_events(events, "cluster.rebuilt"))
    done = {e.job for e in decision_events(events, "cluster.job-done")}
    assert len(done) == 480 and not result.cut_short


def test_a_preemption_that_withdraws_a_deferred_start_is_saved_for_the_next_leader(
    tmp_path: Path,
) -> None:
    # The scheduler preempted dally-0030 while it was stopping, withdrawing the start
    # deferred to its stop, and saved nothing: the store kept the deferred start,
    # the scheduler rebuilt after its next crash counted those GPUs held as well as
    # the job started on them, and crashed on its own check (tests/data/dally_racks_failovers.toml).
    raw = tomllib.loads((DATA / "dally_racks_failovers.toml").read_text())
    result, events = run_raw(raw, tmp_path / "run.db")
    assert result.actor_errors == [] and result.status == "ok"
    rebuilt = [e.t_us for e in decision_events(events, "cluster.rebuilt")]
    assert len(rebuilt) >= 7 and rebuilt[-1] > 48 * MIN  # the rebuild that crashed before
