"""The placement of one Tetris pass, kept current move by move (MAST §3.4).

The daily pass (`actors.policies.mast.tetris.plan`) and its group moves
(`actors.policies.mast.tetris.groups`) score candidate moves against this
incremental view of the placement: bytes per region, GPU demand per (type,
priority, region), each job's count of tables per home region. A candidate
move is scored by the change it causes, from the jobs that read the table
alone, instead of recomputing the cost; the tests check the two agree. A
state lives inside one policy call: the pass stays a pure function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from actors.policies.mast.tetris.cost import (
    PRIORITIES,
    TetrisParams,
    TetrisRegion,
    TetrisSnapshot,
)
from emulator.units import US_PER_S as _MICRO

__all__ = ["PlacementState"]

# GPU- and CPU-hours are kept as integer micro-hours: sums over 10^5 moves stay
# exact, and a demand that drops to nothing is 0, not a float residue of 1e-13.


def _micro(x: float) -> int:
    return round(x * _MICRO)


class PlacementState:
    """The placement of one pass, kept current move by move (lives inside one call).

    Regions, tables and jobs are numbered in name order, so index order is
    name order and ties broken on indices are broken on names.
    """

    def __init__(self, snap: TetrisSnapshot, params: TetrisParams) -> None:
        self.min_gain = params.min_gain
        self.weights = (params.w1, params.w2, params.storage_weight)
        self.overload = params.penalises_overload
        self.scale = params.overload_scale_gpu_hours
        self.wp = params.w_priority
        regions = sorted(snap.regions, key=lambda r: r.name)
        self.rnames = [r.name for r in regions]
        ridx = {n: i for i, n in enumerate(self.rnames)}
        self.nr = len(regions)
        tables = sorted(snap.tables, key=lambda t: t.name)
        self.tnames = [t.name for t in tables]
        tidx = {n: i for i, n in enumerate(self.tnames)}
        self.size = [t.size_bytes for t in tables]
        self.home = [ridx[t.home] for t in tables]
        self.reps = [frozenset(ridx[r] for r in t.replicas) for t in tables]
        self.readers: list[list[int]] = [[] for _ in tables]
        self._init_storage(regions, params)
        self._init_gpus(snap, regions)
        self._init_jobs(snap, params, ridx, tidx)

    def _init_storage(self, regions: list[TetrisRegion], params: TetrisParams) -> None:
        """Bytes held per region (homes + replicas) and the capacity shares."""
        nr = self.nr
        self.cap = [r.storage_bytes for r in regions]
        cap_all = sum(self.cap)
        if cap_all <= 0:  # no capacity anywhere: no share to balance (the reference's 0)
            self.weights = (params.w1, params.w2, 0.0)
        self.cap_share = [c / cap_all if cap_all else 0.0 for c in self.cap]
        self.held = [0] * nr
        for t, size in enumerate(self.size):
            for r in (self.home[t], *self.reps[t]):
                self.held[r] += size
        self.held_all = sum(self.held)
        self._refresh_storage()

    def _init_gpus(self, snap: TetrisSnapshot, regions: list[TetrisRegion]) -> None:
        """GPU supply and its shares; demand per (type, priority, region), empty for now."""
        nr = self.nr
        types = sorted(
            {g for r in regions for g in r.gpu_supply_hours}
            | {j.gpu_type for j in snap.jobs if j.gpu_type is not None}
        )
        self.gidx = {g: i for i, g in enumerate(types)}
        self.supply = [[r.gpu_supply_hours.get(g, 0.0) for r in regions] for g in types]
        self.supply_all = [sum(row) for row in self.supply]
        self.supply_share = [
            [s / tot if tot > 0 else 0.0 for s in row]
            for row, tot in zip(self.supply, self.supply_all, strict=True)
        ]
        ng = len(types)
        self.demand = [[[0] * nr for _ in range(PRIORITIES)] for _ in range(ng)]
        self.demand_g = [[0] * nr for _ in range(ng)]
        self.demand_all = [[0] * PRIORITIES for _ in range(ng)]

    def _init_jobs(
        self,
        snap: TetrisSnapshot,
        params: TetrisParams,
        ridx: dict[str, int],
        tidx: dict[str, int],
    ) -> None:
        """Every job's R and remote bytes; the demand, CPU use and collocation they add."""
        nr, ng, gidx = self.nr, len(self.supply), self.gidx
        regions = sorted(snap.regions, key=lambda r: r.name)
        jobs = sorted(snap.jobs, key=lambda j: j.id)
        apps = sorted(
            {j.app for j in jobs if j.app is not None}
            | {a for r in regions for a in r.cpu_capacity_hours}
        )
        aidx = {a: i for i, a in enumerate(apps)}
        self.cpu_cap = {
            (aidx[a], ridx[r.name]): _micro(cap)
            for r in regions
            for a, cap in r.cpu_capacity_hours.items()
        }
        self.cpu_use: dict[tuple[int, int], int] = {}
        self.j_ml = [j.kind == "ml" for j in jobs]
        self.j_n = [len(j.tables) for j in jobs]
        self.j_total = [sum(self.size[tidx[t]] for t in j.tables) for j in jobs]
        self.j_g = [gidx[j.gpu_type] if j.gpu_type is not None else -1 for j in jobs]
        self.j_p = [j.priority for j in jobs]
        self.j_h = [_micro(j.gpu_hours) for j in jobs]
        self.j_app = [aidx[j.app] if j.app is not None else -1 for j in jobs]
        self.j_cpu = [_micro(j.cpu_hours) for j in jobs]
        self.j_home = [_micro(params.home_weight(j)) for j in jobs]
        self.home_total = sum(self.j_home)
        self.home_need = params.home_threshold * self.home_total
        self.home_ok = 0
        self.j_count: list[dict[int, int]] = []
        self.j_bytes: list[dict[int, int]] = []
        self.j_r: list[int] = []
        self.j_remote: list[int] = []
        dem: dict[tuple[int, int, int], int] = {}
        for j, job in enumerate(jobs):
            count: dict[int, int] = {}
            held: dict[int, int] = {}
            for name in job.tables:
                t = tidx[name]
                self.readers[t].append(j)
                count[self.home[t]] = count.get(self.home[t], 0) + 1
                held[self.home[t]] = held.get(self.home[t], 0) + self.size[t]
            self.j_count.append(count)
            self.j_bytes.append(held)
            r = self._winner(j)
            self.j_r.append(r)
            self.j_remote.append(self._remote(j, r))
            self._add_job(j, -1, r, dem)
        self._commit_demand(dem)
        self.sig = [
            [self._sigmoid(g, r, self.demand_g[g][r]) for r in range(nr)] for g in range(ng)
        ]
        self.sums = [[(0.0, 0.0, 0.0)] * PRIORITIES for _ in range(ng)]
        self.term = [[0.0] * PRIORITIES for _ in range(ng)]
        self.q = [[0.0] * nr for _ in range(ng)]
        for g in range(ng):
            self._refresh_type(g)

    # ---- per-job quantities ------------------------------------------------------
    def _winner(self, j: int) -> int:
        """R(job) from the job's current counts (-1 for None)."""
        count = self.j_count[j]
        if self.j_ml[j]:
            return next(iter(count)) if len(count) == 1 else -1
        held = self.j_bytes[j]
        return max(count, key=lambda r: (count[r], held[r], -r))

    def _remote(self, j: int, r: int) -> int:
        """Expression 1 for one job: its bytes homed away from R(job)."""
        if self.j_ml[j]:
            return 0 if r >= 0 else self.j_total[j]
        return self.j_total[j] - self.j_bytes[j].get(r, 0)

    def _add_job(
        self, j: int, r_old: int, r_new: int, dem: dict[tuple[int, int, int], int]
    ) -> None:
        """Job j goes from R = r_old to r_new: demand into `dem`; CPU and collocation at once."""
        g = self.j_g[j]
        if g >= 0:
            h, p = self.j_h[j], self.j_p[j]
            for r, sign in ((r_old, -1), (r_new, 1)):
                if r >= 0 and h:
                    dem[g, p, r] = dem.get((g, p, r), 0) + sign * h
                if r >= 0 and self.supply[g][r] > 0:
                    self.home_ok += sign * self.j_home[j]
        app = self.j_app[j]
        if app >= 0:
            for r, sign in ((r_old, -1), (r_new, 1)):
                if r >= 0:
                    self.cpu_use[app, r] = self.cpu_use.get((app, r), 0) + sign * self.j_cpu[j]

    def _analytics_after(self, j: int, a: int, b: int, size: int) -> tuple[int, int]:
        """(R, remote bytes) of analytics job j if one of its tables moved from a to b."""
        count, held, r_old = self.j_count[j], self.j_bytes[j], self.j_r[j]

        def key(r: int) -> tuple[int, int, int]:
            c, y = count.get(r, 0), held.get(r, 0)
            if r == a:
                c, y = c - 1, y - size
            elif r == b:
                c, y = c + 1, y + size
            return (c, y, -r)

        # Only a lost and only b gained: unless a was the winner, the winner
        # is the old one or b.
        r_new = b if key(b) > key(r_old) else r_old
        if r_old == a:
            r_new = max((*count, b), key=key)
        return r_new, self.j_total[j] - key(r_new)[1]

    # ---- GPU balance -------------------------------------------------------------
    def _sigmoid(self, g: int, r: int, demand_g: int) -> float:
        over = demand_g / _MICRO - self.supply[g][r]
        if not self.overload or over <= 0:
            return 0.5
        return 1.0 / (1.0 + math.exp(-over / self.scale))

    def _commit_demand(self, dem: dict[tuple[int, int, int], int]) -> None:
        for (g, p, r), dh in dem.items():
            self.demand[g][p][r] += dh
            self.demand_g[g][r] += dh
            self.demand_all[g][p] += dh

    def _refresh_type(self, g: int) -> None:
        """Recompute GPU type g's sums, terms and Q from scratch (no drift).

        Pair (g, p)'s term Σ_r sig_r (D_r/T - s_r)^2 is kept as S2/T^2 - 2 S1/T
        + S0 with S2 = Σ sig D^2, S1 = Σ sig D s, S0 = Σ sig s^2: a change of T
        (a job leaving R = None, say) then costs O(1), not O(regions). Q[g][r]
        = Σ_p w_p (D_pr/T_p - s_r)^2 is what region r's overload factor
        multiplies: a change of that factor alone costs O(1), not O(priorities).
        """
        sig, share, q = self.sig[g], self.supply_share[g], [0.0] * self.nr
        for p in range(PRIORITIES):
            row, t = self.demand[g][p], self.demand_all[g][p]
            s2 = s1 = s0 = 0.0
            for r in range(self.nr):
                s2 += sig[r] * row[r] * row[r]
                s1 += sig[r] * row[r] * share[r]
                s0 += sig[r] * share[r] * share[r]
                if t > 0:
                    q[r] += self.wp[p] * (row[r] / t - share[r]) ** 2
            self.sums[g][p] = (s2, s1, s0)
            self.term[g][p] = self._pair_term(g, t, s2, s1, s0)
        self.q[g] = q if self.supply_all[g] > 0 else [0.0] * self.nr

    def _pair_term(self, g: int, t: int, s2: float, s1: float, s0: float) -> float:
        # No demand for (g, p), or no supply of g: no share to balance.
        if t <= 0 or self.supply_all[g] <= 0:
            return 0.0
        return s2 / (t * t) - 2.0 * s1 / t + s0

    def _gpu_delta(self, dem: dict[tuple[int, int, int], int]) -> float:
        """Change of expression 2 (without w2) if demand changed by `dem`."""
        cells: dict[tuple[int, int], list[int]] = {}
        d_all: dict[tuple[int, int], int] = {}
        d_g: dict[tuple[int, int], int] = {}
        for (g, p, r), dh in dem.items():
            if dh:
                cells.setdefault((g, p), []).append(r)
                d_all[g, p] = d_all.get((g, p), 0) + dh
                d_g[g, r] = d_g.get((g, r), 0) + dh
        new_sig: dict[tuple[int, int], float] = {}
        total = 0.0
        for (g, r), dh in d_g.items() if self.overload else ():
            s = self._sigmoid(g, r, self.demand_g[g][r] + dh)
            if s == self.sig[g][r] or self.supply_all[g] <= 0:
                continue
            # The factor multiplies every priority's cell at (g, r). Pairs whose
            # demand is unchanged see only it: (s' - s) times their part of Q.
            # Pairs whose demand changes are recomputed below, factor included.
            new_sig[g, r] = s
            q = self.q[g][r]
            for (g2, p), rs in cells.items():
                if g2 == g:
                    t = self.demand_all[g][p]
                    if t > 0:
                        q -= self.wp[p] * (self.demand[g][p][r] / t - self.supply_share[g][r]) ** 2
                    if r not in rs:
                        rs.append(r)
            total += (s - self.sig[g][r]) * q
        for (g, p), rs in cells.items():
            s2, s1, s0 = self.sums[g][p]
            row, sig, share = self.demand[g][p], self.sig[g], self.supply_share[g]
            for r in rs:
                so, do = sig[r], row[r]
                sn, dn = new_sig.get((g, r), so), do + dem.get((g, p, r), 0)
                s2 += sn * dn * dn - so * do * do
                s1 += (sn * dn - so * do) * share[r]
                s0 += (sn - so) * share[r] * share[r]
            new = self._pair_term(g, self.demand_all[g][p] + d_all.get((g, p), 0), s2, s1, s0)
            total += self.wp[p] * (new - self.term[g][p])
        return total

    # ---- storage balance ---------------------------------------------------------
    def _storage_term(self, held: Sequence[int], held_all: int) -> float:
        if held_all <= 0:
            return 0.0
        return sum((h / held_all - c) ** 2 for h, c in zip(held, self.cap_share, strict=True))

    def _refresh_storage(self) -> None:
        """Each region's gap (share of bytes held - share of capacity) and the term."""
        total = self.held_all or 1
        self.gap = [h / total - c for h, c in zip(self.held, self.cap_share, strict=True)]
        self.storage_term = self._storage_term(self.held, self.held_all)

    def storage_delta(self, t: int, a: int, b: int) -> float:
        """Δ storage balance term of moving t's home from a to b (nothing is changed)."""
        size, reps, total = self.size[t], self.reps[t], self.held_all
        if a in reps or b in reps:  # a replica is promoted or demoted: the total changes
            after = list(self.held)
            for r, d in ((a, -size), (b, size)):
                if r not in reps:
                    after[r] += d
                    total += d
            return self._storage_term(after, total) - self.storage_term
        if total <= 0:
            return 0.0
        # (g_b + x)^2 - g_b^2 + (g_a - x)^2 - g_a^2 with g the gaps and x = size/total
        x = size / total
        return 2.0 * x * (self.gap[b] - self.gap[a] + x)

    # ---- moves -------------------------------------------------------------------
    def evaluate(self, t: int, b: int) -> tuple[int, float, float] | None:
        """(Δ remote bytes, Δ GPU balance, Δ storage balance) of t to b; None: infeasible."""
        if not self.storage_fits(t, b):
            return None
        jobs = self.jobs_delta(t, b)
        return None if jobs is None else (*jobs, self.storage_delta(t, self.home[t], b))

    def storage_fits(self, t: int, b: int) -> bool:
        """Constraint 4: b may take t (a replica already there costs nothing)."""
        size = self.size[t]
        return not size or b in self.reps[t] or self.held[b] + size < self.cap[b]

    def jobs_delta(self, t: int, b: int, *, home_check: bool = True) -> tuple[int, float] | None:
        """(Δ remote bytes, Δ GPU balance) from t's readers; None if constraint 5 or 6 breaks.

        `home_check=False` leaves constraint 6 to the caller (a group move
        checks it once all its tables have moved).
        """
        a, size = self.home[t], self.size[t]
        d_remote = d_home = 0
        dem: dict[tuple[int, int, int], int] = {}
        cpu: dict[tuple[int, int], int] = {}
        for j in self.readers[t]:
            r_old = self.j_r[j]
            if self.j_ml[j]:
                r_new = b if self.j_count[j].get(b, 0) + 1 == self.j_n[j] else -1
                remote = 0 if r_new >= 0 else self.j_total[j]
            else:
                r_new, remote = self._analytics_after(j, a, b, size)
            d_remote += remote - self.j_remote[j]
            if r_new == r_old:
                continue
            g, app = self.j_g[j], self.j_app[j]
            for r, sign in ((r_old, -1), (r_new, 1)):
                if r < 0:
                    continue
                if g >= 0:
                    key = (g, self.j_p[j], r)
                    dem[key] = dem.get(key, 0) + sign * self.j_h[j]
                    if self.supply[g][r] > 0:
                        d_home += sign * self.j_home[j]
                if app >= 0:
                    cpu[app, r] = cpu.get((app, r), 0) + sign * self.j_cpu[j]
        for key, dc in cpu.items():  # constraint 5: no cap may be newly reached
            cap = self.cpu_cap.get(key)
            if dc > 0 and cap is not None and self.cpu_use.get(key, 0) + dc >= cap:
                return None
        if home_check and d_home < 0 and self.home_ok + d_home < self.home_need:
            return None  # constraint 6
        return d_remote, self._gpu_delta(dem) if dem else 0.0

    def _near(self, t: int) -> set[int] | None:
        """The regions where t's readers' outcome depends on the region; None: all do.

        Moved to a region holding none of its readers' tables ("foreign"), t
        leaves a multi-table ML job with R = None and an analytics job with
        the same winner, as long as that winner keeps 2+ tables (a newcomer
        with one table cannot beat it): the readers' part of the cost change
        is then the same for every foreign region and is computed once.
        """
        a, near = self.home[t], set()
        for j in self.readers[t]:
            count = self.j_count[j]
            if self.j_ml[j]:
                if self.j_n[j] == 1:
                    return None  # the job follows the table
            elif max(c - (r == a) for r, c in count.items()) < 2:
                return None
            near.update(count)
        return near

    def best_move(self, t: int) -> tuple[float, int] | None:
        """(gain, region) of t's best feasible move, or None if staying is best."""
        w1, w2, w3 = self.weights
        a, near = self.home[t], self._near(t)
        best, best_r = -self.min_gain, -1
        foreign: tuple[int, float] | bool | None = False  # not computed yet
        for b in range(self.nr):
            if b == a or not self.storage_fits(t, b):
                continue
            if near is None or b in near:
                jobs = self.jobs_delta(t, b)
            else:
                if foreign is False:
                    foreign = self.jobs_delta(t, b)
                jobs = foreign
            if jobs is None:
                continue
            delta = w1 * jobs[0] + w2 * jobs[1] + (w3 * self.storage_delta(t, a, b) if w3 else 0.0)
            if delta < best:  # strict: among equals the first region by name stays
                best, best_r = delta, b
        return None if best_r < 0 else (-best, best_r)

    def apply(self, t: int, b: int) -> None:
        """Move t's home to b and bring every derived quantity up to date."""
        a, size = self.home[t], self.size[t]
        for r, d in ((a, -size), (b, size)):
            if r not in self.reps[t]:  # a replica region holds the bytes either way
                self.held[r] += d
                self.held_all += d
        self.home[t] = b
        dem: dict[tuple[int, int, int], int] = {}
        for j in self.readers[t]:
            count, held = self.j_count[j], self.j_bytes[j]
            count[a] -= 1
            held[a] -= size
            if not count[a]:
                del count[a], held[a]
            count[b] = count.get(b, 0) + 1
            held[b] = held.get(b, 0) + size
            r_old, r_new = self.j_r[j], self._winner(j)
            self.j_remote[j] = self._remote(j, r_new)
            if r_new != r_old:
                self.j_r[j] = r_new
                self._add_job(j, r_old, r_new, dem)
        self._commit_demand(dem)
        for g, r in {(g, r) for g, _, r in dem}:
            self.sig[g][r] = self._sigmoid(g, r, self.demand_g[g][r])
        for g in sorted({g for g, _, _ in dem}):
            self._refresh_type(g)
        self._refresh_storage()

    def overloaded(self, g: int, r: int) -> bool:
        """Region r's demand for GPU type g exceeds its supply."""
        return self.demand_g[g][r] > self.supply[g][r] * _MICRO

    def homes(self) -> dict[str, str]:
        return {name: self.rnames[self.home[t]] for t, name in enumerate(self.tnames)}
