"""The corpus, the mutations and the search loop (see the package docstring)."""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, TextIO

import msgspec

from emulator.errors import InputError
from emulator.run.coverage import system_kind
from emulator.run.explore.arms import (
    ARMS,
    GROUP_FLOOR,
    GROUP_PRIOR,
    GROUPS,
    PRIOR,
    PRIOR_OTHER,
    SHARE_MIN,
    Arm,
    Member,
    payoff,
)
from emulator.run.explore.budget import Budget
from emulator.run.explore.features import Renewal, Window, run_schedule, run_schedule_shipped
from emulator.run.explore.grid import GridSpec
from emulator.run.explore.results import ExploreResult, Failure, RunRecord
from emulator.run.explore.space import fault_space, fresh_schedule, front_load, length_field
from emulator.run.failures import INTERNAL_ERROR
from emulator.run.pools import ClusterSpec, dask_pool, land_db, process_pool
from emulator.run.runaway import RUNAWAY, events_cap
from emulator.run.runner import remove_run_files
from emulator.run.scenario import (
    Fault,
    parse_raw,
    resolve_scenario,
)
from emulator.run.shrink import Schedule, materialise, shrink_run, to_toml, variant
from emulator.run.targets import instance_role
from emulator.units import Duration

FAULTS_MAX = 64  # a schedule longer than this is cut: more faults rarely mean more coverage
OPENING = 2  # fresh seeds run right after the base, before any arm is chosen
FRONT_FACTOR = 3.0  # how much closer to the start `front` and `early` bring the faults
AIM_LEAD_US = 60_000_000  # how far before a phase window an aimed fault may begin
AIMS_PER_RUN = (1, 2, 3, 4)  # aimed faults an `aim` mutation adds (each into its own pick)
AIM_SCALE = 1 / 256  # the earliest an aimed fault lands in its window, as a share of it
# How an aimed fault is timed: a takeover's delay before the window's end (a
# leader's fault, once runs measured one), early in the window, or shortly
# before it (the draw's thresholds, in that order).
AIM_TAKEOVER = 0.5
AIM_BEFORE = 0.9
LEADS_MAX = 64  # takeover delays remembered (the latest)


# ---- the search ----------------------------------------------------------------------
class Explorer:
    def __init__(
        self,
        ref: str,
        *,
        seed: int,
        budget: Budget,
        out_dir: Path,
        log: TextIO,
        stop_at_first: bool = False,
        shrink_runs: int = 60,
        grid: GridSpec | None = None,
    ) -> None:
        from emulator.run.runner import plan_run

        scenario, text, source = resolve_scenario(ref)
        raw = parse_raw(text, source)
        if not isinstance(raw, dict):
            raise InputError(source, "", "a scenario is a table of keys")
        self.raw = raw
        self.plan = plan_run(scenario, text, source)
        self.schedule = materialise(self.plan, scenario.seed)
        self.space = fault_space(self.plan, scenario.seed, self.schedule)
        self.rng = random.Random(f"explore:{seed}")
        self.result = ExploreResult(
            scenario.name, seed, budget, system=system_kind(scenario.system)
        )
        self.out_dir = out_dir
        self.log = log
        self.stop_at_first = stop_at_first
        self.shrink_runs = shrink_runs
        self.seen: set[str] = set()
        self.corpus: list[Member] = []
        self.base_seed = scenario.seed
        self.arms = {arm: Arm() for arm in ARMS}
        self.drawn = 0  # candidates drawn after the base
        # Phase flag -> runs that were in it. Counted in runs, not windows: a run
        # opens hundreds of auction windows and a few of failover, and counted
        # in windows the auction phase, where a GMS leader lost with bids out
        # comes back to award them, was never aimed at.
        self.flags: dict[str, int] = {}
        self.leads: list[int] = []  # takeover delays measured by the runs (`Features`)
        self.events_max: int | None = None  # set by the first clean run
        # `--grid`: the schedules to run after the base, in order, instead of arms'.
        self.grid = None if grid is None else grid.schedules(self.space, seed)
        if self.grid is not None:
            self.result.grid = len(self.grid)
        # The guided search's `grid` arm: the default grid, built when first drawn.
        self.spells: list[tuple[Fault, ...]] | None = None

    # -- choosing the next schedule
    def _arm(self) -> str:
        """The next run's arm: a group in proportion to what its runs have paid
        (never under its `GROUP_FLOOR`), then an arm of it the same way, so arms and
        groups that stop paying get fewer runs (a bandit)."""
        groups = [g for g, arms in GROUPS.items() if any(self._can(a) for a in arms)]
        worth = []
        for g in groups:
            tries = sum(self.arms[a].tries for a in GROUPS[g])
            paid = sum(self.arms[a].paid for a in GROUPS[g])
            worth.append((2.0 * GROUP_PRIOR[g] + paid) / (2.0 + tries))
        total = sum(worth) or 1.0
        weights = [max(w / total, GROUP_FLOOR[g]) for g, w in zip(groups, worth, strict=True)]
        group = self.rng.choices(groups, weights=weights)[0]
        arms = [a for a in GROUPS[group] if self._can(a)]
        worth = [self.arms[a].worth(PRIOR.get(a, PRIOR_OTHER)) for a in arms]
        total = sum(worth) or 1.0
        return self.rng.choices(arms, weights=[max(w / total, SHARE_MIN) for w in worth])[0]

    def _can(self, arm: str) -> bool:
        if arm in ("fresh", "front"):
            return True
        if arm == "grid":
            return self._spells() is not None
        if not self.corpus:
            return False
        if arm == "aim":
            return any(self._aimable(m) for m in self.corpus)
        if arm == "expiry":
            return "pause" in self.space.actions and any(self._expirable(m) for m in self.corpus)
        return True

    def _spells(self) -> list[tuple[Fault, ...]] | None:
        """The `grid` arm's spells not yet run (None once there are none left)."""
        if self.spells is None:
            try:
                spells = GridSpec().schedules(self.space, self.result.seed)
            except InputError:
                spells = []  # no role with several instances, or no clock long enough
            # Only the kinds of fault the scenario's nemesis may use (a fault's tag
            # is its action, as a scenario spells it).
            actions = set(self.space.actions)
            self.spells = [
                spell
                for spell in reversed(spells)
                if all(type(f).__struct_config__.tag in actions for f in spell)
            ]
        return self.spells or None  # taken from the end: in the grid's order

    def _pick(self, members: list[Member] | None = None) -> Member:
        members = members or self.corpus
        weights = [m.energy() for m in members]
        member = self.rng.choices(members, weights=weights)[0]
        member.picked += 1
        return member

    def _aimable(self, parent: Member) -> list[Window]:
        """The parent's windows a fault may be put in: those that open before the
        fault span ends (after the final heal a schedule holds no faults)."""
        return [w for w in parent.windows if w.start_us < self.space.end_us]

    def _aim(self, parent: Member, faults: list[Fault]) -> None:
        """Add a fault inside a phase window of the parent's run, at a phase's actors.

        The rarer a phase over the search so far, the likelier it is aimed at.
        The fault hits the leader of a role whose actor acted in the phase,
        and begins early in the window, shortly before it, or, for a leader
        once runs measured a takeover's delay, at least that delay before the
        window's end (and lasts that long), so that the successor leads while
        the phase holds; in a window shorter than that delay, early in it for
        about that delay (a leader back to a phase it left, its lease gone).
        """
        # A phase first, the rarer the likelier; then one of its windows.
        windows = self._aimable(parent)
        flags = sorted({w.flag for w in windows})
        flag = self.rng.choices(flags, weights=[1.0 / (1 + self.flags.get(f, 0)) for f in flags])[0]
        window = self.rng.choice([w for w in windows if w.flag == flag])
        roles: list[str] = []  # in the order their actors first acted: the opener's first
        for actor in window.actors:
            role = instance_role(actor)
            if role is not None and role in self.space.roles and role not in roles:
                roles.append(role)
        action: str | None = None
        target: str | None = None
        kinds = [a for a in ("crash", "pause") if a in self.space.actions]
        if kinds and self.rng.random() < 0.85:
            action = self.rng.choice(kinds)
            if roles and self.rng.random() < 0.75:
                # The first actors to act in a phase are the ones it is about.
                weights = [1 / (1 + i) for i in range(len(roles))]
                role = self.rng.choices(roles, weights=weights)[0]
            else:
                role = self.rng.choice(self.space.roles)
            target = f"leader of {role}"
        span = max(1, window.end_us - window.start_us)
        # Early in the window, at any scale (log-uniform over its first 1/256 to
        # all of it), but not at its very instant: what opened the phase at that
        # microsecond may not have happened when the fault does.
        point = window.start_us + int(span * AIM_SCALE ** self.rng.random())
        draw = self.rng.random()
        lead = self.rng.choice(self.leads) if self.leads else 0
        takeover = target is not None and 0 < lead < span and draw < AIM_TAKEOVER
        # A window shorter than a takeover: the leader is lost early in it for
        # about a takeover's delay (half to one and a half of it), so it comes
        # back to the phase it left with its lease gone, before or after its
        # successor acts: a stale leader finishing what it began (an award whose
        # write forgot the lease lands only then).
        stale = 0
        if target is not None and lead >= max(1, span) and draw < AIM_TAKEOVER:
            stale = max(1, int(lead * (0.5 + self.rng.random())))
        if takeover:
            # Inside the window, at least a takeover's delay (as runs so far
            # measured it) before its end: the leader that opened the phase is
            # lost in it, and its successor begins to lead while it still holds.
            # (A leader lost before the window would not open it at all.)
            at = window.start_us + 1 + int((span - lead) * self.rng.random())
        elif draw < AIM_BEFORE:
            at = point
        else:
            # Shortly before: a leader lost then is taken over by another only a
            # lease later, which may be inside the window.
            at = window.start_us - int(max(span, AIM_LEAD_US) * self.rng.random())
        drawn = self.space.draw(self.rng, at_us=at, action=action, target=target)
        if drawn is not None and takeover:
            # Out for at least the lead: a leader back sooner keeps its lease.
            drawn = self.space.lasting(drawn, lead + span)
        elif drawn is not None and stale:
            drawn = self.space.with_length(drawn, stale)
        if drawn is not None:
            faults.append(drawn)

    def _expirable(self, parent: Member) -> list[Renewal]:
        """The parent's renewals a pause may begin after and end at the expiry of:
        inside the fault span, with a microsecond to spare before the holder's
        next renewal (a fault at a renewal's own instant comes before it)."""
        start, end = self.space.start_us, self.space.end_us
        return [
            r
            for r in parent.renewals
            if start <= r.at_us
            and r.expires_us <= end
            and min(r.next_us, r.expires_us) > r.at_us + 1
        ]

    def _mutate(self, parent: Member, mutation: str) -> tuple[str, int, tuple[Fault, ...]]:
        faults = list(parent.faults)
        seed = parent.seed
        if mutation == "aim" and not self._aimable(parent):
            mutation = "add"
        expirable = self._expirable(parent) if mutation == "expiry" else []
        if mutation == "expiry" and not expirable:
            mutation = "add"
        if mutation == "remove" and not faults:
            mutation = "add"
        if mutation in ("move", "retarget", "stretch") and not faults:
            mutation = "add"
        if mutation == "splice" and len(self.corpus) < 2:
            mutation = "add"
        if mutation == "aim":
            # A clean run costs as much with one aimed fault as with three, and
            # it stops at the first that fails: several hypotheses per run.
            for _ in range(self.rng.choice(AIMS_PER_RUN)):
                self._aim(parent, faults)
        elif mutation == "expiry":
            # A lease's holder paused after one of its renewals until the very instant
            # that lease expires: a random pause ends on that boundary with a
            # probability near zero, and a check off by one at it (`<=` for `<`)
            # renews a lease the holder must take anew.
            faults.append(self.space.until_expiry(self.rng.choice(expirable), self.rng))
        elif mutation == "early":
            faults = list(front_load(tuple(faults), self.space, FRONT_FACTOR))
        elif mutation == "add":
            drawn = self.space.draw(self.rng)
            if drawn is not None:
                faults.append(drawn)
        elif mutation == "remove":
            faults.pop(self.rng.randrange(len(faults)))
        elif mutation == "move":
            i = self.rng.randrange(len(faults))
            span = max(1, self.space.end_us - self.space.start_us)
            shift = int(self.rng.gauss(0, span / 10))
            at = min(self.space.end_us - 1, max(self.space.start_us, int(faults[i].at) + shift))
            faults[i] = msgspec.structs.replace(faults[i], at=Duration(at))
        elif mutation == "retarget":
            i = self.rng.randrange(len(faults))
            faults[i] = self.space.retarget(faults[i], self.rng)
        elif mutation == "stretch":
            i = self.rng.randrange(len(faults))
            name = length_field(faults[i])
            if name is not None:
                old = int(getattr(faults[i], name))
                factor = self.rng.choice((0.25, 0.5, 0.9, 1.1, 2.0, 4.0))
                faults[i] = self.space.with_length(faults[i], int(old * factor))
        elif mutation == "timeout":
            # A fault of the parent's, or a new crash or pause, lasting a timeout.
            timed = [i for i, f in enumerate(faults) if length_field(f) is not None]
            kinds = [a for a in ("crash", "pause") if a in self.space.actions]
            if not timed or self.rng.random() < 0.5:
                action = self.rng.choice(kinds) if kinds else None
                drawn = self.space.draw(self.rng, action=action)
                if drawn is not None and length_field(drawn) is not None:
                    faults.append(drawn)
                    timed = [len(faults) - 1]
            if timed:
                i = self.rng.choice(timed)
                acted = {instance_role(a) for w in parent.windows for a in w.actors}
                faults[i] = self.space.timed(faults[i], self.rng, sorted(r for r in acted if r))
        elif mutation == "splice":
            other = self.rng.choice([m for m in self.corpus if m is not parent] or [parent])
            cut = self.rng.randrange(
                self.space.start_us, max(self.space.start_us + 1, self.space.end_us)
            )
            faults = [f for f in faults if int(f.at) < cut] + [
                f for f in other.faults if int(f.at) >= cut
            ]
        else:  # reseed: the same faults over another draw of the workload and the network
            seed = self.rng.randrange(1, 2**31)
        faults.sort(key=lambda f: int(f.at))
        return mutation, seed, tuple(faults[:FAULTS_MAX])

    # -- running
    def _candidates(self, index: int, n: int) -> list[tuple[str, int, tuple[Fault, ...], Any]]:
        """The next `n` schedules to run: the base first, then each from an arm
        chosen by what it has paid so far (`_arm`): a fresh seed with the
        schedule its nemesis draws (what a random search would run), the same
        front-loaded, or a mutation of a corpus member."""
        if index == 0:
            return [("base", self.base_seed, tuple(self.schedule.faults), None)]
        out: list[tuple[str, int, tuple[Fault, ...], Any]] = []
        if self.grid is not None:
            for faults in self.grid[self.drawn : self.drawn + n]:
                out.append(("grid", self.base_seed, faults, None))
            self.drawn += len(out)
            return out
        for _ in range(n):
            # The corpus starts as a fuzzer's does, from a few diverse runs: the
            # base, then OPENING fresh seeds (what finds a medium bug soonest).
            self.drawn += 1
            arm = "fresh" if self.drawn <= OPENING else self._arm()
            if arm in ("fresh", "front", "grid"):
                seed = self.rng.randrange(1, 2**31)
                faults = fresh_schedule(self.plan, self.space, seed)
                if arm == "front":
                    faults = front_load(faults, self.space, FRONT_FACTOR)
                elif arm == "grid":
                    # On a fresh seed's own draw: a spell alone would rerun the
                    # base's workload, and a run that also does a random search's
                    # work keeps explore finding what random seeds find.
                    spells = self._spells()
                    assert spells is not None  # `_can` said so
                    faults = tuple(sorted(faults + spells.pop(), key=lambda f: int(f.at)))
                out.append((arm, seed, faults, None))
                continue
            members = None
            if arm == "aim":
                members = [m for m in self.corpus if self._aimable(m)]
            elif arm == "expiry":
                members = [m for m in self.corpus if self._expirable(m)]
            parent = self._pick(members)
            mutation, seed, faults = self._mutate(parent, arm)
            out.append((mutation, seed, faults, parent))
        return out

    def run(
        self,
        on_run: Callable[[RunRecord], None] | None = None,
        pool: Executor | None = None,
        batch: int = 1,
    ) -> ExploreResult:
        """Search until the budget is spent (or the first failure, if asked).

        With a `pool` the runs of a batch go to its workers together; the
        batch is drawn before any of its runs, and the outcomes are taken in
        the batch's order, so the search depends on the batch size, never on
        which worker finished first.
        """
        self.out_dir.mkdir(parents=True, exist_ok=True)
        work = self.out_dir / "explore-run.db"
        wall0 = time.perf_counter()
        result = self.result
        heal = self.schedule.heal_at_us
        index = 0
        cpu = 0.0
        stop = False
        while not stop and not result.budget.spent(index, time.perf_counter() - wall0, cpu):
            size = batch if pool is not None else 1
            if result.budget.runs is not None:
                size = min(size, result.budget.runs - index)
            batch_now = self._candidates(index, size)
            if not batch_now:
                break  # the grid is done
            cap = self.events_max
            if pool is None:
                outcomes = [
                    run_schedule(self.raw, heal, s, f, work, cap) for _, s, f, _ in batch_now
                ]
            else:
                futures = [
                    pool.submit(run_schedule_shipped, self.raw, heal, s, f, cap)
                    for _, s, f, _ in batch_now
                ]
                outcomes = [future.result() for future in futures]
            for (mutation, seed, faults, parent), outcome in zip(batch_now, outcomes, strict=True):
                index += 1
                cpu += outcome.cpu_s
                if self.events_max is None and outcome.failure is None:
                    # The first clean run sets what a run may cost (`emulator.run.runaway`).
                    self.events_max = events_cap(outcome.events)
                new = outcome.signature - self.seen
                self.seen |= new
                result.tallies.append(outcome.counts)
                if mutation in self.arms:
                    arm = self.arms[mutation]
                    arm.tries += 1
                    arm.paid += payoff(new)
                self.leads = (self.leads + list(outcome.takeovers))[-LEADS_MAX:]
                for flag, count in outcome.phase_counts.items():
                    if count:
                        self.flags[flag] = self.flags.get(flag, 0) + 1
                if new:
                    self.corpus.append(
                        Member(
                            seed,
                            faults,
                            len(new),
                            windows=outcome.windows,
                            renewals=outcome.renewals,
                        )
                    )
                    if parent is not None:
                        parent.paid += len(new)
                failure = outcome.failure
                record = RunRecord(
                    index, mutation, seed, len(faults), len(new), outcome.status,
                    f"{failure[0]} after {failure[1]}" if failure else None, round(cpu, 3),
                )  # fmt: skip
                result.runs.append(record)
                result.features_over_time.append(len(self.seen))
                if on_run is not None:
                    on_run(record)
                if failure is not None and failure not in {f.signature for f in result.failures}:
                    if outcome.files:
                        land_db(outcome.files, self.out_dir, work.name)
                    result.failures.append(
                        self._keep_failure(failure, index, seed, faults, cpu, work)
                    )
                    if self.stop_at_first:
                        stop = True
                        break
        result.corpus = len(self.corpus)
        result.features = len(self.seen)
        # The campaign's report stays with its failures (and marks the folder as used).
        report = json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n"
        (self.out_dir / "explore.json").write_text(report, encoding="utf-8")
        remove_run_files(work)
        return result

    def _keep_failure(
        self,
        failure: tuple[str, str],
        index: int,
        seed: int,
        faults: tuple[Fault, ...],
        cpu_s: float,
        work: Path,
    ) -> Failure:
        """Write the failing schedule and its shrunk reproducer (the run's db is `work`)."""
        n = len(self.result.failures) + 1
        stem = f"failure-{n}-{failure[0]}"
        found = variant(
            self.raw,
            Schedule(list(faults), self.schedule.heal_at_us),
            range(len(faults)),
            self.raw.get("invariants", {}),
        )
        found["name"] = f"{self.raw.get('name', 'explore')}-{stem}"
        found["seed"] = seed
        header = [f"Found by `mastemu explore` (seed {self.result.seed}), run {index}."]
        written = self.out_dir / f"{stem}.toml"
        written.write_text(to_toml(found, header), encoding="utf-8")
        db = self.out_dir / f"{stem}.db"
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(work) + suffix)
            if src.exists():
                src.replace(Path(str(db) + suffix))
        minimal: str | None = None
        if failure[0] not in (INTERNAL_ERROR, RUNAWAY):  # shrink's re-runs have no cap
            minimal = str(self.out_dir / f"{stem}.min.toml")
            code = shrink_run(
                db,
                invariant=failure[0],
                target=Path(minimal),
                runs_max=self.shrink_runs,
                out=_Quiet(),
            )
            if code != 0:
                minimal = None
        print(
            f"failure {n}: {failure[0]} (after {failure[1]}) at run {index}: {written}"
            + (f"; minimal: {minimal}" if minimal else ""),
            file=self.log,
        )
        return Failure(failure, index, seed, round(cpu_s, 3), str(written), minimal)


class _Quiet:
    """A text sink for shrink's progress lines (explore prints its own)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def explore(
    ref: str,
    *,
    seed: int,
    budget: Budget,
    out_dir: Path,
    log: TextIO | None = None,
    stop_at_first: bool = False,
    on_run: Callable[[RunRecord], None] | None = None,
    jobs: int = 1,
    cluster: ClusterSpec | None = None,
    grid: GridSpec | None = None,
) -> ExploreResult:
    """Search `ref`'s fault schedules within `budget` (the module docstring).

    `jobs` > 1 runs batches of that many schedules in local processes, and
    `cluster` on a Dask cluster (a batch per round of its worker threads).
    `grid` runs the dark spells of `emulator.run.explore.grid` instead of arms.
    """
    explorer = Explorer(
        ref,
        seed=seed,
        budget=budget,
        out_dir=out_dir,
        log=log or sys.stdout,
        stop_at_first=stop_at_first,
        grid=grid,
    )
    if cluster is not None:
        with dask_pool(cluster, jobs if jobs > 1 else None) as dask:
            return explorer.run(on_run, dask.executor, dask.slots)
    if jobs > 1:
        with process_pool(jobs) as pool:
            return explorer.run(on_run, pool, jobs)
    return explorer.run(on_run)
