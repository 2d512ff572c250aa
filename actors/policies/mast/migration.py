"""Which table copies the migration service runs now, and how fast (MAST §3.4, §3.5, §5.3).

The service copies replicas across the WAN as fluid bulk flows in the
background QoS class (`emulator.net.flows`). A flow's rate is set by weighted
max-min sharing under per-flow caps, so this policy hands out a rate cap per
copy that together fill each link: the copies' rates are the policy's plan.
The actor re-plans whenever copies arrive or finish, a link changes, a day
starts, and every few minutes in between (deadline rates drift with progress).
Links here are directed src→dst; `emulator.net.flows` has one pair link for both
directions (and shared egress/ingress), so the actor passes each direction
the part it may use; where the plan still overbooks, max-min sharing rules.

Rules, in the service order ⟨priority (0 highest), soft deadline (none last),
created, id⟩:
1. A finished copy, or one whose link has no capacity now, is not admitted.
2. At most `copies_per_link_max` copies run per src→dst link; the rest wait
   (`link_busy`). A running copy pushed out pauses and keeps its bytes.
3. Daily byte cap (Fig. 8): the bytes the admitted copies may still move today
   (`budget_bytes`) add up to at most `daily_cap − moved today`. A copy gets
   all its remaining bytes if they fit. The first copy that does not fit gets
   what is left (`daily_cap_partial`): it pauses at the cap and resumes from
   its bytes done the next day. Every later copy waits (`daily_cap`) — no
   backfilling, so a small low-priority copy never overtakes a big urgent one.
4. Rates per link, in service order: each admitted copy gets its weighted
   share of what the copies ahead of it left, weight = `priority_weight_base
   ** (PRIORITY_LOWEST − priority)`; a copy with a soft deadline that needs
   more gets the rate that finishes it in time, `remaining / max(deadline −
   now, deadline_window_min_s)`, as far as what is left allows (short of it:
   `deadline_at_risk`). So a copy never slows one ahead of it (data of
   high-priority jobs first); within a level the deadline copies come first
   and get what they need; the rest is shared by weight, so lower levels are
   slowed, not starved; the last copy takes what remains and fills the link.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from emulator.units import US_PER_S, at_least
from store.mast.records import PRIORITY_LOWEST

Reason = Literal[
    "admitted",  # runs at its planned rate
    "deadline_at_risk",  # runs, but the link cannot give the rate its deadline needs
    "daily_cap_partial",  # runs until it has moved `budget_bytes`, then waits for tomorrow
    "daily_cap",  # waits: today's byte cap is used up
    "link_busy",  # waits: its link already runs `copies_per_link_max` copies
    "link_down",  # waits: its link has no capacity now (partition, fault)
    "complete",  # nothing left to copy
]


class _Migration(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of the migration Structs (subclasses repeat kw_only: msgspec does not inherit it)."""


class MigrationParams(_Migration, kw_only=True):
    """Knobs of `plan_copies`; see the module docstring for their roles."""

    copies_per_link_max: Annotated[int, Meta(ge=1, le=10_000)] = 4
    priority_weight_base: Annotated[float, Meta(ge=1.0, le=1_000.0)] = 2.0
    deadline_window_min_s: Annotated[float, Meta(gt=0.0, le=86_400.0)] = 60.0
    orders_max: Annotated[int, Meta(ge=1, le=10_000_000)] = 100_000


class MigrationSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """`[system.migration]`: the service's knobs (`enabled` adds it to the run)."""

    enabled: bool = False
    # Bytes per emulated day across all copies (None: no cap).
    daily_cap_bytes: int | None = None
    tick: at_least(US_PER_S) = 300_000_000
    policy: MigrationParams = MigrationParams()
    qos: str = "background"


class ActiveCopy(_Migration, kw_only=True):
    """A copy order being served: table `table` from region `src` to `dst`, `bytes_done` moved."""

    id: str
    table: str
    src: str
    dst: str
    size_bytes: int
    bytes_done: int = 0
    priority: int  # of the data's most urgent job, 0 highest
    soft_deadline_us: int | None = None
    created_us: int

    def __post_init__(self) -> None:
        where = f"copies.{self.id}"
        if not 0 <= self.bytes_done <= self.size_bytes:
            raise ValueError(f"{where}: need 0 <= bytes_done <= size_bytes")
        if self.src == self.dst:
            raise ValueError(f"{where}: src and dst are both {self.src!r}")
        if not 0 <= self.priority <= PRIORITY_LOWEST:
            raise ValueError(f"{where}.priority must be in 0..{PRIORITY_LOWEST}")


class LinkCapacity(_Migration, kw_only=True):
    """Bytes/s the background QoS class may use from `src` to `dst` (0: link down)."""

    src: str
    dst: str
    bytes_s: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bytes_s) and self.bytes_s >= 0):
            raise ValueError(f"links.{self.src}->{self.dst}.bytes_s must be finite and >= 0")


class MigrationSnapshot(_Migration, kw_only=True):
    """What the service knows at `now_us`; `daily_cap_bytes` None means no cap."""

    now_us: int
    copies: tuple[ActiveCopy, ...]
    links: tuple[LinkCapacity, ...]
    daily_cap_bytes: int | None = None
    moved_today_bytes: int = 0

    def __post_init__(self) -> None:
        if (self.daily_cap_bytes or 0) < 0 or self.moved_today_bytes < 0:
            raise ValueError("daily_cap_bytes and moved_today_bytes must be >= 0")


class CopyDecision(_Migration, kw_only=True):
    """One copy's fate. Not admitted: `rate_cap_bytes_s` is 0.0 (hold the flow still)."""

    id: str
    admitted: bool
    rate_cap_bytes_s: float
    weight: float
    budget_bytes: int  # may move this much more today (0 if not admitted)
    reason: Reason


class MigrationDecision(_Migration, kw_only=True):
    """The decisions in service order, and the daily budget left unassigned."""

    copies: tuple[CopyDecision, ...]
    budget_left_bytes: int | None

    def by_id(self) -> dict[str, CopyDecision]:
        return {c.id: c for c in self.copies}


DEFAULT_PARAMS = MigrationParams()


def service_key(c: ActiveCopy) -> tuple[int, float, int, str]:
    """⟨priority, deadline (none last), created, id⟩: smaller goes first."""
    deadline = math.inf if c.soft_deadline_us is None else c.soft_deadline_us
    return (c.priority, deadline, c.created_us, c.id)


def needed_rate_bytes_s(
    c: ActiveCopy, now_us: int, params: MigrationParams = DEFAULT_PARAMS
) -> float:
    """Bytes/s that finish `c` by its soft deadline; 0 without one.

    A copy at or past its deadline counts `deadline_window_min_s` as its time
    left: it asks for as much as the link can give, but not an infinite rate.
    """
    if c.soft_deadline_us is None:
        return 0.0
    window_s = max((c.soft_deadline_us - now_us) / US_PER_S, params.deadline_window_min_s)
    return (c.size_bytes - c.bytes_done) / window_s


def plan_copies(
    snap: MigrationSnapshot, params: MigrationParams = DEFAULT_PARAMS
) -> MigrationDecision:
    """Admission, daily budgets and rate caps for every copy (module docstring).

    Raises:
        ValueError: more than `orders_max` copies, duplicate copy ids or links,
            or a copy whose src→dst link is not listed.
    """
    if len(snap.copies) > params.orders_max:
        raise ValueError(f"{len(snap.copies):,} copies exceed orders_max={params.orders_max:,}")
    if len({c.id for c in snap.copies}) != len(snap.copies):
        raise ValueError("duplicate copy ids")
    capacity = {(lk.src, lk.dst): lk.bytes_s for lk in snap.links}
    if len(capacity) != len(snap.links):
        raise ValueError("a src->dst link is listed twice")
    budget = None
    if snap.daily_cap_bytes is not None:
        budget = max(0, snap.daily_cap_bytes - snap.moved_today_bytes)
    order = sorted(snap.copies, key=service_key)
    running: dict[tuple[str, str], list[ActiveCopy]] = {}
    fate: dict[str, tuple[Reason, int]] = {}  # id → (reason, budget) of every copy
    for c in order:
        link = (c.src, c.dst)
        if link not in capacity:
            raise ValueError(f"copies.{c.id}: no capacity given for link {c.src}->{c.dst}")
        remaining = c.size_bytes - c.bytes_done
        if remaining == 0:
            fate[c.id] = ("complete", 0)
        elif capacity[link] <= 0:
            fate[c.id] = ("link_down", 0)
        elif len(running.get(link, ())) >= params.copies_per_link_max:
            fate[c.id] = ("link_busy", 0)
        elif budget == 0:
            fate[c.id] = ("daily_cap", 0)
        else:
            allowed = remaining if budget is None else min(remaining, budget)
            if budget is not None:
                budget -= allowed
            fate[c.id] = ("admitted" if allowed == remaining else "daily_cap_partial", allowed)
            running.setdefault(link, []).append(c)

    rates: dict[str, float] = {}
    for link, copies in running.items():
        left = capacity[link]
        weight_left = sum(_weight(c, params) for c in copies)
        for c in copies:  # service order
            weight = _weight(c, params)
            need = needed_rate_bytes_s(c, snap.now_us, params)
            share = min(left, left * weight / weight_left)
            rates[c.id] = max(share, min(need, left))
            if rates[c.id] < need and fate[c.id][0] == "admitted":
                fate[c.id] = ("deadline_at_risk", fate[c.id][1])
            left -= rates[c.id]
            weight_left -= weight
    return MigrationDecision(
        copies=tuple(
            CopyDecision(
                id=c.id,
                admitted=c.id in rates,
                rate_cap_bytes_s=rates.get(c.id, 0.0),
                weight=_weight(c, params),
                budget_bytes=fate[c.id][1],
                reason=fate[c.id][0],
            )
            for c in order
        ),
        budget_left_bytes=budget,
    )


def _weight(c: ActiveCopy, params: MigrationParams) -> float:
    return params.priority_weight_base ** (PRIORITY_LOWEST - c.priority)


class RateSegment(_Migration, kw_only=True):
    """The copy ran at `rate_bytes_s` from `start_us` to `end_us` (0 while paused)."""

    start_us: int
    end_us: int
    rate_bytes_s: float


def account_progress(
    c: ActiveCopy, history: Sequence[RateSegment], *, budget_bytes: int | None = None
) -> ActiveCopy:
    """`c` after running through `history`, continuing from its `bytes_done`.

    Bytes moved are the integral of the rate, floored once at the end; they
    never take `bytes_done` past `size_bytes`, nor exceed `budget_bytes` (the
    copy's daily budget) when given.

    Raises:
        ValueError: a segment that ends before it starts, overlaps the one
            before it, or has a negative or non-finite rate.
    """
    moved = 0.0
    last_end: int | None = None
    for i, seg in enumerate(history):
        if seg.end_us < seg.start_us or (last_end is not None and seg.start_us < last_end):
            raise ValueError(f"history[{i}]: segments must be ordered and not overlap")
        if not (math.isfinite(seg.rate_bytes_s) and seg.rate_bytes_s >= 0):
            raise ValueError(f"history[{i}].rate_bytes_s must be finite and >= 0")
        moved += seg.rate_bytes_s * (seg.end_us - seg.start_us) / US_PER_S
        last_end = seg.end_us
    room = c.size_bytes - c.bytes_done
    if budget_bytes is not None:
        room = min(room, max(0, budget_bytes))
    return msgspec.structs.replace(c, bytes_done=c.bytes_done + min(math.floor(moved), room))
