"""RAS (MAST §3.1, after the RAS paper): which dynamic cluster each machine of a region is in.

Inputs: every machine of the region (fault domain, kind = GPU type or
`CPU_KIND`, health, current cluster) and each cluster's intended machines per
kind. What must stay true of the answer:
- a machine is in at most one cluster; an unhealthy machine is in none;
- capacity: every cluster holds at least its intended machines of each kind;
- buffer (`RasParams.buffer`): for every cluster, kind and fault domain f, the
  cluster's machines of that kind outside f are at least the intended count,
  so losing any one fault domain, the largest included, leaves the intent.
Too few machines make capacity and buffer soft: the gaps are reported in
`shortfall`/`buffer_shortfall`, never raised. Goals, lexicographic: (1) least
total capacity gap, (2) least total buffer gap (per cluster and kind, the gap
the worst fault domain would leave), (3) least churn: machines that leave their
current cluster (a free machine joining costs nothing), (4) fewest machines
assigned, i.e. least beyond intended. (1) is a closed formula imposed as a
constraint; (2)-(4) are one `scipy.optimize.milp` solve with costs 1 per
machine, w = N + 1 per move (`churn_weight`) and w·N + N + 1 per unit of buffer
gap (N: healthy machines of the kind): exact, as the lower goals cannot differ
by more. Solving (2) first and pinning it gave the same answers 3x slower, and
on a tight region found no point in time.

Consequences: a shrunk cluster keeps its surplus until another cluster needs
it (a release is churn); a machine whose cluster has no spec any more always
leaves. Kinds are exact (no substitutes); `ClusterSpec.ml` does not enter the
MIP, so machines cross between ML and non-ML clusters exactly when the specs
require it. Rack locality is not modelled.

Scale: machines of one kind, fault domain and current cluster are
interchangeable and kinds never interact, so each kind is one MIP over counts
x[(fault domain, current cluster), cluster], its size independent of the
number of machines. Counts become hosts deterministically: within a group
(hosts by name) the current cluster keeps the first ones, then other clusters
by id take theirs. Same input, same output, unless `time_limit_s` is hit
(status "time_limit": best point found; "failed": none, current members kept).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import msgspec
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import csr_matrix

from emulator.errors import ComponentBug
from store.mast.records import Machine

CPU_KIND = "cpu"
Status = Literal["optimal", "time_limit", "failed"]
_STATUSES: tuple[Status, ...] = ("optimal", "time_limit", "failed")  # better first
_Row = tuple[dict[int, float], float, float]  # (column → coefficient, lower, upper)


class _Ras(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the RAS Structs.

    Subclasses repeat `kw_only=True`: msgspec does not inherit it (it applies
    to the fields a class itself defines).
    """


class RasMachine(_Ras, kw_only=True):
    """A machine of the region as RAS sees it; `cluster` is its current dynamic cluster."""

    host: str
    fault_domain: str
    kind: str
    healthy: bool = True
    cluster: str | None = None


class ClusterSpec(_Ras, kw_only=True):
    """A dynamic cluster's intended machines per kind, e.g. {"H100": 14, "cpu": 24}."""

    id: str
    ml: bool = True
    intended: dict[str, int]

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("ras.clusters[]: id must not be empty")
        for kind, n in self.intended.items():
            if not kind or n < 0:
                raise ValueError(f"ras.clusters[{self.id}].intended[{kind!r}] must be >= 0")


class RasParams(_Ras, kw_only=True):
    """Knobs of one RAS run.

    `churn_weight`: how many surplus machines one avoided move is worth; None
    (default) makes churn strictly more important than surplus. `time_limit_s`
    bounds the whole run, split evenly over the kinds (one solve each); a
    solve that finds nothing in time keeps the current members (status
    "failed").
    """

    buffer: bool = True
    churn_weight: float | None = None
    time_limit_s: float = 30.0

    def __post_init__(self) -> None:
        if self.churn_weight is not None and self.churn_weight < 0:
            raise ValueError("ras.params.churn_weight must be >= 0")
        if not self.time_limit_s > 0:
            raise ValueError("ras.params.time_limit_s must be > 0")


class RasAssignment(_Ras, kw_only=True):
    """The decision: new membership, the moves it takes, and how well specs are met.

    `moves` are (host, old, new) for every machine whose cluster changes, by
    host. `assigned[cluster][kind]` counts machines of every kind held;
    `shortfall` and `buffer_shortfall` cover every intended kind (0 when met;
    the latter is what losing the cluster's largest fault domain would leave
    missing). `churn` counts machines that left a cluster.
    """

    cluster_of: dict[str, str | None]
    moves: tuple[tuple[str, str | None, str | None], ...]
    assigned: dict[str, dict[str, int]]
    shortfall: dict[str, dict[str, int]]
    buffer_shortfall: dict[str, dict[str, int]]
    buffer_met: bool
    churn: int
    status: Status


def kind_of(machine: Machine) -> str:
    """A store machine's RAS kind: its GPU type, or `CPU_KIND`."""
    return machine.gpu_type if machine.gpu_type and machine.gpus > 0 else CPU_KIND


def assign_machines(
    machines: Sequence[RasMachine],
    clusters: Sequence[ClusterSpec],
    params: RasParams | None = None,
) -> RasAssignment:
    """Assign the region's machines to its dynamic clusters (see the module docstring)."""
    params = params or RasParams()
    for what, names in (
        ("machines", [m.host for m in machines]),
        ("clusters", [c.id for c in clusters]),
    ):
        if dup := sorted(n for n, k in Counter(names).items() if k > 1):
            raise ValueError(f"ras.{what}: duplicate names {dup}")
    specs = sorted(clusters, key=lambda c: c.id)
    healthy = sorted((m for m in machines if m.healthy), key=lambda m: m.host)
    kinds = sorted({m.kind for m in healthy})
    time_s = params.time_limit_s / max(1, len(kinds))
    new: dict[str, str | None] = {h: None for h in sorted(m.host for m in machines)}
    status: Status = "optimal"
    for kind in kinds:
        got, st = _solve_kind([m for m in healthy if m.kind == kind], kind, specs, params, time_s)
        new.update(got)
        status = max(status, st, key=_STATUSES.index)
    return _report(machines, specs, new, status)


def _solve_kind(
    ms: list[RasMachine], kind: str, specs: list[ClusterSpec], params: RasParams, time_s: float
) -> tuple[dict[str, str | None], Status]:
    """One kind's MIP over group → cluster counts; returns host → new cluster."""
    ids = [c.id for c in specs]
    need = {c.id: c.intended.get(kind, 0) for c in specs}
    groups: dict[tuple[str, str], list[str]] = {}
    for m in ms:  # hosts stay sorted within a group
        groups.setdefault((m.fault_domain, m.cluster or ""), []).append(m.host)
    keys = sorted(groups)
    fds = sorted({fd for fd, _ in keys})
    # Variables: x[g, c] where c asks for this kind or g is already in c; then
    # s[c] (capacity shortfall) and b[c] (buffer shortfall) for each asking c.
    xs = [(gi, c) for gi, (_, cur) in enumerate(keys) for c in ids if need[c] > 0 or cur == c]
    asking = [c for c in ids if need[c] > 0]
    n_x, n_s = len(xs), len(asking)
    n_b = n_s if params.buffer else 0
    n_var = n_x + n_s + n_b
    if n_var == 0:  # nobody asks for this kind and nobody holds it
        return {}, "optimal"
    in_group: list[list[int]] = [[] for _ in keys]
    into: dict[str, list[int]] = {c: [] for c in asking}
    for j, (g, c) in enumerate(xs):
        in_group[g].append(j)
        if c in into:
            into[c].append(j)
    size = [len(groups[key]) for key in keys]
    rows: list[_Row] = [(dict.fromkeys(js, 1.0), 0.0, size[g]) for g, js in enumerate(in_group)]
    for ci, c in enumerate(asking):
        rows.append(({**dict.fromkeys(into[c], 1.0), n_x + ci: 1.0}, need[c], np.inf))
        for f in fds if params.buffer else ():
            outside = {j: 1.0 for j in into[c] if keys[xs[j][0]][0] != f}
            rows.append(({**outside, n_x + n_s + ci: 1.0}, need[c], np.inf))
    # Goal (1) in closed form: kinds never compete, so only the global deficit is unavoidable.
    s_min = max(0, sum(need.values()) - len(ms))
    rows.append(({n_x + ci: 1.0 for ci in range(n_s)}, 0.0, s_min))
    ub = np.array([size[g] for g, _ in xs] + [need[c] for c in asking] * (1 + params.buffer))
    # Goals (2)-(4) by weights (module docstring): every assigned machine costs 1, every
    # kept one earns back w, every machine of buffer gap costs more than both can move.
    w = len(ms) + 1.0 if params.churn_weight is None else params.churn_weight
    cost = np.zeros(n_var)
    for j, (g, c) in enumerate(xs):
        cost[j] = 1.0 - (w if keys[g][1] == c else 0.0)
    cost[n_x + n_s :] = w * len(ms) + len(ms) + 1.0
    sol, status = _milp(cost, rows, ub, time_s)
    if sol is None:  # no solution at all: keep whoever may stay, report the gaps
        sol = np.array([size[g] if keys[g][1] == c else 0 for g, c in xs])
    out: dict[str, str | None] = {}
    for gi, key in enumerate(keys):
        hosts = groups[key]
        counts = {xs[j][1]: int(sol[j]) for j in in_group[gi] if sol[j] > 0}
        order = sorted(counts, key=lambda c: (c != key[1], c))  # current cluster first
        at = 0
        for c in order:
            out.update(dict.fromkeys(hosts[at : at + counts[c]], c))
            at += counts[c]
        if at > len(hosts):
            raise ComponentBug(f"ras: {kind} group {key} over-assigned ({at})")
    return out, status


def _milp(
    cost: np.ndarray, rows: list[_Row], ub: np.ndarray, time_s: float
) -> tuple[np.ndarray | None, Status]:
    """Minimise over integers in 0..ub (none past ub): the rounded point, or None if none found."""
    n = len(cost)
    at = [(r, j, v) for r, (coef, _, _) in enumerate(rows) for j, v in coef.items()]
    r_idx, c_idx, vals = (np.array(col) for col in zip(*at, strict=True))
    a = csr_matrix((vals, (r_idx, c_idx)), shape=(len(rows), n))
    lo, hi = np.array([row[1] for row in rows]), np.array([row[2] for row in rows])
    ubs = np.concatenate([ub, np.full(n - len(ub), np.inf)])
    res = milp(
        cost,
        integrality=np.ones(n),
        bounds=Bounds(np.zeros(n), ubs),
        constraints=LinearConstraint(a, lo, hi),
        options={"time_limit": time_s, "mip_rel_gap": 0.0},
    )
    if res.x is None:
        return None, "failed"
    x = np.round(res.x)
    ax, tol = a @ x, 1e-6
    if np.abs(res.x - x).max() > tol or (ax < lo - tol).any() or (ax > hi + tol).any():
        raise ComponentBug("ras: milp returned a non-integral or infeasible point")
    return x, "optimal" if res.status == 0 else "time_limit"


def _report(
    machines: Sequence[RasMachine],
    specs: list[ClusterSpec],
    new: dict[str, str | None],
    status: Status,
) -> RasAssignment:
    """Moves, counts and shortfalls of a membership."""
    held: dict[str, dict[str, Counter[str]]] = {c.id: {} for c in specs}  # cluster → kind → fd → n
    for m in machines:
        c = new[m.host]
        if c is not None:
            held[c].setdefault(m.kind, Counter())[m.fault_domain] += 1
    moves = tuple(
        sorted((m.host, m.cluster, new[m.host]) for m in machines if m.cluster != new[m.host])
    )
    assigned = {c: {k: sum(fd.values()) for k, fd in sorted(ks.items())} for c, ks in held.items()}
    shortfall: dict[str, dict[str, int]] = {}
    buffer_shortfall: dict[str, dict[str, int]] = {}
    for spec in specs:
        shortfall[spec.id], buffer_shortfall[spec.id] = {}, {}
        for k, n in sorted(spec.intended.items()):
            by_fd = held[spec.id].get(k, Counter())
            total = sum(by_fd.values())
            shortfall[spec.id][k] = max(0, n - total)
            buffer_shortfall[spec.id][k] = max(0, n - (total - max(by_fd.values(), default=0)))
    return RasAssignment(
        cluster_of=new,
        moves=moves,
        assigned=assigned,
        shortfall=shortfall,
        buffer_shortfall=buffer_shortfall,
        buffer_met=all(v == 0 for d in buffer_shortfall.values() for v in d.values()),
        churn=sum(1 for _, old, _ in moves if old is not None),
        status=status,
    )
