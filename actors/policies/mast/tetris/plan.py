"""Tetris's daily pass (MAST §3.4): hill climbing over the homes of tables.

Starting from today's homes, every table is tried in every other region; the
best feasible region (lowest cost of `actors.policies.mast.tetris.cost`, hard
constraints kept) goes on a move queue keyed by its gain (cost before minus
cost after). The queue is then drained, highest gain first: the popped
table's best region is worked out again against the placement as it now is
(earlier moves may have changed it), and the table moves there if that still
lowers the cost. The pass stops when the queue is empty; the day's move
quota (bytes copied) caps it: a table bigger than what is left of the quota
is skipped and smaller ones still move, so the quota is used up as far as it
goes. Each table moves at most once a pass; tomorrow's pass corrects the rest.

Every choice is deterministic: tables are visited by name, equal costs go to
the first region by name, equal gains to the first table by name.

The pass is a pure function. Inside one call it keeps an incremental view of
the placement (`PlacementState`, `actors.policies.mast.tetris.state`): bytes
per region, GPU demand per (type, priority, region), each job's count of
tables per home region. A candidate move is scored by the change it causes,
from the jobs that read the table alone, instead of recomputing the cost;
the tests check the two agree.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from actors.policies.mast.tetris.cost import (
    TetrisCost,
    TetrisParams,
    TetrisSnapshot,
    TetrisStruct,
    Version,
    tetris_cost,
)
from actors.policies.mast.tetris.groups import plan_group_moves
from actors.policies.mast.tetris.state import PlacementState

__all__ = ["MoveEval", "TetrisMove", "TetrisPlan", "evaluate_move", "homes_after", "plan_tetris"]


class TetrisMove(TetrisStruct, kw_only=True):
    """One planned move of a table's home; `gain` is the cost it removed when it was made."""

    table: str
    src: str
    dst: str
    gain: float
    size_bytes: int


class TetrisPlan(TetrisStruct, kw_only=True):
    """The outcome of one pass: the moves in the order made, and the cost around them.

    `queued` tables had a gainful move at the start; of those, `skipped_quota`
    did not fit in what was left of the move quota and `skipped_stale` no
    longer had a gainful move when their turn came.
    """

    version: Version
    moves: tuple[TetrisMove, ...]
    cost_before: TetrisCost
    cost_after: TetrisCost
    bytes_planned: int
    queued: int = 0
    skipped_quota: int = 0
    skipped_stale: int = 0


class MoveEval(TetrisStruct, kw_only=True):
    """What moving one table would change, term by term (weighted; negative = cheaper)."""

    table: str
    dst: str
    feasible: bool
    delta: float
    cross_region: float
    gpu_balance: float
    storage_balance: float


def plan_tetris(snapshot: TetrisSnapshot, params: TetrisParams) -> TetrisPlan:
    """One daily pass: the moves of table homes, highest gain first, within the move quota.

    v0 plans nothing (users' static choices stand) but still reports the cost.
    `cost_before` and `cost_after` are computed from scratch by
    `tetris_cost`, not taken from the incremental state.
    """
    before = tetris_cost(snapshot, params)
    if params.version == "tetris-v0":
        return TetrisPlan(
            version=params.version, moves=(), cost_before=before, cost_after=before, bytes_planned=0
        )
    state = PlacementState(snapshot, params)
    start = list(state.home)
    queue = []
    for t in range(len(state.size)):
        best = state.best_move(t)
        if best is not None:
            queue.append((-best[0], t))
    queued = len(queue)
    smallest = min((state.size[t] for _, t in queue), default=0)
    heapq.heapify(queue)
    left = params.move_quota_bytes
    moves: list[TetrisMove] = []
    skipped_quota = skipped_stale = 0
    while queue:
        if left < smallest:  # nothing queued fits any more
            skipped_quota += len(queue)
            break
        _, t = heapq.heappop(queue)
        size = state.size[t]
        if size > left:
            skipped_quota += 1
            continue
        best = state.best_move(t)  # earlier moves may have changed t's best region
        if best is None:
            skipped_stale += 1
            continue
        gain, b = best
        src = state.home[t]
        state.apply(t, b)
        left -= size
        moves.append(
            TetrisMove(
                table=state.tnames[t],
                src=state.rnames[src],
                dst=state.rnames[b],
                gain=gain,
                size_bytes=size,
            )
        )
    if params.group_jobs_max and left > 0:
        index = {name: t for t, name in enumerate(state.tnames)}
        locked = {index[m.table] for m in moves}
        for todo, b, nbytes, gain in plan_group_moves(state, locked, left, params.group_jobs_max):
            left -= nbytes
            for t in todo:
                moves.append(
                    TetrisMove(
                        table=state.tnames[t],
                        src=state.rnames[start[t]],
                        dst=state.rnames[b],
                        gain=gain / len(todo),
                        size_bytes=state.size[t],
                    )
                )
    return TetrisPlan(
        version=params.version,
        moves=tuple(moves),
        cost_before=before,
        cost_after=tetris_cost(snapshot, params, state.homes()),
        bytes_planned=params.move_quota_bytes - left,
        queued=queued,
        skipped_quota=skipped_quota,
        skipped_stale=skipped_stale,
    )


def homes_after(snapshot: TetrisSnapshot, plan: TetrisPlan) -> dict[str, str]:
    """Every table's home once the plan's moves are done."""
    homes = {t.name: t.home for t in snapshot.tables}
    for m in plan.moves:
        homes[m.table] = m.dst
    return homes


def evaluate_move(
    snapshot: TetrisSnapshot,
    params: TetrisParams,
    table: str,
    dst: str,
    after: Sequence[tuple[str, str]] = (),
) -> MoveEval:
    """Score moving `table` to `dst`, once the (table, dst) moves in `after` are made.

    The same incremental arithmetic the pass uses, exposed to explain a
    decision ("why did t move?") and to test it against `tetris_cost`. It
    builds the state of the whole snapshot: for inspection, not for loops.
    """
    state = PlacementState(snapshot, params)
    tidx = {n: i for i, n in enumerate(state.tnames)}
    ridx = {n: i for i, n in enumerate(state.rnames)}
    for name, region in after:
        if state.home[tidx[name]] != ridx[region]:
            state.apply(tidx[name], ridx[region])
    t, b = tidx[table], ridx[dst]
    ev = (0, 0.0, 0.0) if state.home[t] == b else state.evaluate(t, b)
    if ev is None:
        return MoveEval(
            table=table,
            dst=dst,
            feasible=False,
            delta=math.nan,
            cross_region=math.nan,
            gpu_balance=math.nan,
            storage_balance=math.nan,
        )
    w1, w2, w3 = state.weights
    parts = (float(w1 * ev[0]), w2 * ev[1], w3 * ev[2])
    return MoveEval(
        table=table,
        dst=dst,
        feasible=True,
        delta=sum(parts),
        cross_region=parts[0],
        gpu_balance=parts[1],
        storage_balance=parts[2],
    )
