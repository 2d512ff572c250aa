"""Group moves: all the tables of one ML job to one region, as a single hill-climbing step.

An ML job reads its tables only where all of them are homed (§3.3): moving
its tables one at a time takes it through R(job) = NULL, where it trains
nowhere at home. For a large high-priority job that intermediate step alone
can break constraint 6, so single-table hill climbing never starts moving it,
however much the GPU balance would gain once every table has arrived. This
is what kept an overloaded region overloaded when users had put a few big
multi-table jobs there.

After the single-table moves of a pass, Tetris therefore also tries, for each
multi-table ML job whose region is NULL or overloaded for its GPU type, the
move of all its tables not yet in region b to b, for every region b with its
GPU type. Constraints 4 and 5 are checked at each step, constraint 6 once at
the end (the pass's placement never rests in the intermediate state). The
candidates are queued by gain and re-scored before they are taken, like the
single-table queue; a table moves at most once per pass, so a job with a table
already moved this pass is not a candidate.
"""

from __future__ import annotations

import heapq

from actors.policies.mast.tetris.state import PlacementState

__all__ = ["group_gain", "plan_group_moves"]


def group_gain(state: PlacementState, tables: list[int], b: int) -> float | None:
    """Cost removed by moving every table in `tables` to b; None if a constraint breaks.

    The moves are applied to `state` to score them and then undone, so the
    state is unchanged on return.
    """
    w1, w2, w3 = state.weights
    home_before = state.home_ok
    moved: list[tuple[int, int]] = []
    delta = 0.0
    feasible = True
    for t in tables:
        a = state.home[t]
        jobs = state.jobs_delta(t, b, home_check=False) if state.storage_fits(t, b) else None
        if jobs is None:
            feasible = False
            break
        delta += w1 * jobs[0] + w2 * jobs[1] + (w3 * state.storage_delta(t, a, b) if w3 else 0.0)
        state.apply(t, b)
        moved.append((t, a))
    if feasible:
        # Constraint 6 on the end state; a pass that starts below the threshold
        # may still take a group move that does not lower it further.
        feasible = state.home_ok >= min(state.home_need, home_before)
    for t, a in reversed(moved):
        state.apply(t, a)
    return -delta if feasible else None


def _job_tables(state: PlacementState) -> list[list[int]]:
    tables: list[list[int]] = [[] for _ in state.j_ml]
    for t, readers in enumerate(state.readers):
        for j in readers:
            tables[j].append(t)
    return tables


def _candidates(state: PlacementState, locked: set[int], limit: int) -> list[tuple[int, list[int]]]:
    """(job, its tables) of multi-table ML jobs that are NULL or in an overloaded region."""
    out = []
    for j, tables in enumerate(_job_tables(state)):
        g, r = state.j_g[j], state.j_r[j]
        if not state.j_ml[j] or len(tables) < 2 or g < 0 or locked.intersection(tables):
            continue
        if r >= 0 and not state.overloaded(g, r):
            continue
        out.append((j, tables))
    # The biggest jobs first when there are more candidates than the limit.
    out.sort(key=lambda c: (-state.j_h[c[0]], c[0]))
    return out[:limit]


def _best(
    state: PlacementState, j: int, tables: list[int], left: int
) -> tuple[float, int, list[int]] | None:
    g, best = state.j_g[j], None
    for b in range(state.nr):
        if b == state.j_r[j] or state.supply[g][b] <= 0:
            continue
        todo = [t for t in tables if state.home[t] != b]
        if not todo or sum(state.size[t] for t in todo) > left:
            continue
        gain = group_gain(state, todo, b)
        if gain is not None and gain > state.min_gain and (best is None or gain > best[0]):
            best = (gain, b, todo)
    return best


def plan_group_moves(
    state: PlacementState, locked: set[int], left: int, limit: int
) -> list[tuple[list[int], int, int, float]]:
    """Take gainful group moves, best first, applying them to `state`.

    Returns (tables moved, dst, bytes, gain) per group taken, in order;
    `locked` (tables already moved this pass) grows with every group taken.
    """
    queue = []
    for j, tables in _candidates(state, locked, limit):
        best = _best(state, j, tables, left)
        if best is not None:
            queue.append((-best[0], j, tables))
    heapq.heapify(queue)
    taken = []
    while queue:
        _, j, tables = heapq.heappop(queue)
        if locked.intersection(tables):
            continue
        best = _best(state, j, tables, left)  # earlier groups may have changed it
        if best is None:
            continue
        gain, b, todo = best
        nbytes = sum(state.size[t] for t in todo)
        for t in todo:
            state.apply(t, b)
        locked.update(tables)
        left -= nbytes
        taken.append((todo, b, nbytes, gain))
    return taken
