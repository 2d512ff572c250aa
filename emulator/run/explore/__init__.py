"""`mastemu explore SCENARIO --budget N|T`: a guided search of fault schedules.

A random nemesis finds shallow bugs fast and deep ones rarely: a bug that
needs a failover inside an open auction, or a pause exactly as long as a
lease, is one schedule in millions. Exploring keeps what is new instead:
every run yields a coverage signature, a schedule whose run reached
something no run reached before joins a corpus, and new schedules are
mutations of the corpus' members (fault added, removed, moved in time,
retargeted, lengthened or shortened, aimed into a phase; faults brought
earlier; two schedules spliced; the run seed changed), with more runs given
to members and kinds of mutation that keep paying off.
This is the feedback loop of coverage-guided fuzzers (AFL's corpus and
energy), with a protocol's features in place of a program's edges, as
Mallory does for Jepsen.

The signature of a run (`Features`) is a set of strings:
  - `S:NAME`: a sometimes property reached (`emulator.sometimes`);
  - `F:ACTION@PHASE`: a fault of that kind began while the system was in
    that phase (`register_phases`: for MAST, an auction open, a copy in
    flight, a preemption pending, a victim checkpointing, a leader just
    changed…), and `F:ACTION:KIND@PHASE` with the kind of actor it hit;
  - `P:PHASE`: an abstract protocol state the run was in (a combination of
    phases, `checkpointing+preempting`);
  - `D:TYPE:B`: a decision type seen about 2^B times (a run that makes an
    unusual number of a decision is a different run);
  - `V:INVARIANT`: a violation.

A run also says *when* each phase held and who acted in it (`Window`), so
an aimed mutation can put a fault inside a phase its parent's run was in
(or just before it), at the leader of the role that opened the phase: a
CM leader crash while a victim checkpoints, a GMS failover while a
workload is dispatching. Runs measure how long after a leader is lost its
role's next epoch begins (`Outcome.takeovers`); once known, an aimed
leader fault often lands early enough in the window for its successor to
lead while the phase still holds, and lasts that long (a leader lost
before the phase would not open it; one back sooner keeps its lease).
A timed mutation aims in length instead: a fault lasting one of the
system's own timeouts (every duration its parameters set: a lease, a
deadline, the time after which a region is given up), two back to back, or
a quarter more; a crash or pause so timed often takes a whole role down
(a role whose actors acted), since only then does nobody take over within
a lease and a long outage reach the timeouts above it.
An expiry mutation aims at an instant: runs keep a sample of their lease
grants and renewals (`Renewal`), and the mutation pauses a holder right
after one of them until exactly the instant that lease expires, so that it
wakes at the boundary and must take a new epoch (a random pause ends there
with a probability near zero; a check off by one at a lease's end shows
only there).

Where runs come from (`arms.ARMS`): fresh seeds with their nemesis' draw
(what random search runs, also front-loaded: a run stops at its first
violation, so earlier faults are cheaper), faults aimed in time, in length
or at a lease's expiry,
fresh seeds with one dark spell of `explore --grid` added to their draw, in
the grid's order (whole roles out together past the system's clocks;
crashes and pauses, where the nemesis may use them), and the other
mutations. Runs go to groups and arms in proportion to the new features
their runs brought (a bandit, each group with a floor), and to corpus
members whose children paid.

A failure's signature is its invariant and the decision just before it,
with the kind of actor that made it (`lease-safety after lease.leader by
demo`).

Determinism: the search draws from its own RNG stream (`--seed`), runs one
schedule at a time and reads nothing of the wall clock, so a budget in runs
gives the same corpus, the same failures and the same files every time. A
budget in time stops after the run that crossed it.

A violation is de-duplicated by its signature (the invariant and the
decision type that came just before it), a run failed otherwise by its
kind and detail (`emulator.run.failures`), and each distinct one is shrunk
(`emulator.run.shrink`) and written once as a minimal scenario.
"""

from emulator.run.explore.budget import Budget, parse_budget
from emulator.run.explore.features import Features, Outcome, run_schedule, run_schedule_shipped
from emulator.run.explore.results import ExploreResult, Failure, RunRecord, summary_lines
from emulator.run.explore.search import Explorer, explore
from emulator.run.explore.space import FaultSpace, fault_space

__all__ = [
    "Budget",
    "ExploreResult",
    "Explorer",
    "Failure",
    "FaultSpace",
    "Features",
    "Outcome",
    "RunRecord",
    "explore",
    "fault_space",
    "parse_budget",
    "run_schedule",
    "run_schedule_shipped",
    "summary_lines",
]
