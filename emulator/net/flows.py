"""Fluid model of bulk transfers (data migration, checkpoints) across the WAN.

What is modelled: a bulk transfer is a *flow* of `nbytes` from region `src` to
region `dst`. It crosses three WAN resources ("links"), each with a capacity
in bytes per second:

    ("out", src)          the egress of the source region,
    ("pair", a, b)        the region pair, a < b (one link per unordered pair),
    ("in", dst)           the ingress of the destination region.

Active flows share every link by weighted max-min fairness, computed by
progressive filling (water-filling): all unfrozen flows grow at a speed
proportional to their QoS weight; when a link saturates, the flows crossing it
freeze; a flow whose optional rate cap is reached freezes too; repeat until
every flow is frozen. A flow crossing a link that is down (pair partitioned or
region down) is paused: rate 0, consumes nothing, keeps its bytes, and resumes
where it stopped when the link heals.

What must stay true:
- Pure mechanism: no clock, no asyncio, no randomness. Time is integer
  microseconds supplied by the caller (the kernel) and never goes backwards.
- Every mutating call first advances to its `now_us`, so the rates in force
  up to that instant are accounted before the change takes effect.
- Completion times are integer microseconds rounded *up*, so a flow is never
  reported done before its bytes are through; `advance` finishes exactly the
  flows whose reported completion time is <= `now_us`, so
  `next_completion_us` and `advance` can never disagree.
- Deterministic: flows are visited in id order and links in sorted order;
  float sums are always taken in that order. Starting the same flows in a
  different order at the same instant gives bit-identical results.
- Bytes done are floats internally, reported as `floor` ints; a flow whose
  remaining bytes are <= `DONE_EPS_BYTES` counts as complete.

How the kernel uses it: after any change it reads `version` and
`next_completion_us()` and schedules an event; when the event fires it calls
`advance(t)` and handles the finished flow ids. An event whose recorded
version is older than `version` is stale and dropped.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from emulator.errors import EmulatorInternalError
from emulator.units import S as US_PER_S

Link = tuple[str, ...]
"""A WAN resource: `("out", region)`, `("in", region)` or `("pair", a, b)` with a < b."""

DEFAULT_QOS_WEIGHTS: Final[Mapping[str, float]] = MappingProxyType(
    {"default": 1.0, "background": 0.25, "high": 4.0}
)
"""Weight of each QoS class in the weighted max-min share of a link."""

DONE_EPS_BYTES: Final[float] = 1e-6
"""A flow with at most this many bytes left is complete.

Float bookkeeping of bytes done can land a hair short of `nbytes`; a
millionth of a byte is far below anything a transfer could mean. (Flows that
reach their computed completion time finish by time, not by this test.)
"""

# A transfer time within a picosecond above a whole microsecond is float noise
# from `remaining * 1e6 / rate`, not a real fraction: snapping it down keeps
# exact cases exact (200 MB at 100 MB/s is 2 s, not 2 s + 1 us). At 1 TB/s a
# picosecond is one byte, so "never done early" holds to within float noise.
_TIME_SNAP_US: Final[float] = 1e-6

# Water-filling freezes every link whose fill level is within this relative
# distance of the lowest one in the same round: ties broken by float noise
# would otherwise cost an extra round and leave a sliver of capacity unused.
_TIE_REL: Final[float] = 1e-12


def flow_path(src: str, dst: str) -> tuple[Link, Link, Link]:
    """The links a flow from `src` to `dst` crosses: egress, pair, ingress."""
    a, b = (src, dst) if src < dst else (dst, src)
    return (("out", src), ("pair", a, b), ("in", dst))


@dataclass(slots=True)
class _Flow:
    """One transfer. Bytes done at time t is `done_bytes + rate_bps * (t - anchor_us)`.

    The anchor moves only when the rate changes, so a flow whose rate is
    untouched by other flows' arrivals keeps its completion time bit for bit.
    """

    flow_id: int
    src: str
    dst: str
    nbytes: int
    qos: str
    weight: float
    links: tuple[Link, Link, Link]
    rate_cap_bps: float | None
    done_bytes: float
    anchor_us: int
    rate_bps: float
    finish_us: int | None
    # Finished but not yet handed out by `advance`.
    finished: bool = False


def _ceil_us(x: float) -> int:
    """Round a duration in microseconds up to an integer, forgiving float noise."""
    whole = math.floor(x)
    return whole if x - whole <= _TIME_SNAP_US else whole + 1


def _check_rate_cap(flow_id: int, cap: float | None) -> float | None:
    """Validate a rate cap; an infinite cap means no cap."""
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, int | float) or math.isnan(cap) or cap < 0:
        raise ValueError(f"flow {flow_id}: rate_cap_bps must be a number >= 0, got {cap!r}")
    return None if math.isinf(cap) else float(cap)


def _check_capacity(link: Link, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"capacity of {link}: expected bytes/s, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"capacity of {link}: must be finite and > 0 bytes/s, got {value!r}")
    return float(value)


class FluidNetwork:
    """WAN links shared by bulk flows under weighted max-min fairness.

    Capacities are in bytes per second; times are integer microseconds. See
    the module docstring for the model and its guarantees.

    Raises:
        ValueError: a region without both egress and ingress capacity, a pair
            naming an unknown region or given twice, a capacity that is not a
            finite positive number, or a QoS weight that is not.
    """

    def __init__(
        self,
        region_egress_bps: Mapping[str, float],
        region_ingress_bps: Mapping[str, float],
        pair_bps: Mapping[tuple[str, str], float],
        qos_weights: Mapping[str, float] = DEFAULT_QOS_WEIGHTS,
    ) -> None:
        for region in sorted(set(region_egress_bps) ^ set(region_ingress_bps)):
            side = "ingress" if region in region_egress_bps else "egress"
            raise ValueError(f"region {region!r} has no {side} capacity")
        self._regions: frozenset[str] = frozenset(region_egress_bps)
        self._capacity_bps: dict[Link, float] = {}
        for region in sorted(self._regions):
            out, inn = ("out", region), ("in", region)
            self._capacity_bps[out] = _check_capacity(out, region_egress_bps[region])
            self._capacity_bps[inn] = _check_capacity(inn, region_ingress_bps[region])
        for (x, y), value in sorted(pair_bps.items()):
            for region in (x, y):
                if region not in self._regions:
                    raise ValueError(f"pair ({x!r}, {y!r}) names unknown region {region!r}")
            if x == y:
                raise ValueError(f"pair ({x!r}, {y!r}) joins a region to itself")
            link: Link = ("pair", *sorted((x, y)))
            if link in self._capacity_bps:
                raise ValueError(f"pair ({x!r}, {y!r}) given twice (in both orders)")
            self._capacity_bps[link] = _check_capacity(link, value)
        self._qos_weights: dict[str, float] = {}
        for qos, weight in sorted(qos_weights.items()):
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ValueError(f"qos_weights[{qos!r}]: expected a number, got {weight!r}")
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"qos_weights[{qos!r}]: must be finite and > 0, got {weight!r}")
            self._qos_weights[qos] = float(weight)

        self._flows: dict[int, _Flow] = {}
        self._pairs_down: set[Link] = set()
        self._regions_down: set[str] = set()
        self._now_us = 0
        self._version = 0

    # ------------------------------------------------------------------ queries

    @property
    def version(self) -> int:
        """Incremented on every change of the flow set or of any flow's rate."""
        return self._version

    @property
    def now_us(self) -> int:
        """The time the model has been advanced to."""
        return self._now_us

    def capacity_bps(self, link: Link) -> float:
        """Capacity of one link; ValueError if there is no such link."""
        try:
            return self._capacity_bps[link]
        except KeyError:
            raise ValueError(f"unknown link {link!r}") from None

    def links(self) -> list[Link]:
        """Every link, sorted."""
        return sorted(self._capacity_bps)

    def link_down(self, link: Link) -> bool:
        """Whether a link carries nothing now (pair partitioned or region down)."""
        if link[0] == "pair":
            return link in self._pairs_down or not self._regions_down.isdisjoint(link[1:])
        return link[1] in self._regions_down

    def link_load_bps(self) -> dict[Link, float]:
        """Summed rate of the flows on each link (links with no flow omitted)."""
        load: dict[Link, float] = {}
        for flow_id in sorted(self._flows):
            flow = self._flows[flow_id]
            for link in flow.links:
                load[link] = load.get(link, 0.0) + flow.rate_bps
        return dict(sorted(load.items()))

    def active(self) -> list[int]:
        """Ids of flows started and not yet cancelled or returned by `advance`, sorted.

        A flow that has finished but has not yet been handed out by `advance`
        is still listed (its rate is 0 and its progress is complete).
        """
        return sorted(self._flows)

    def rate(self, flow_id: int) -> float:
        """Current rate of a flow in bytes/s (0 while paused or once finished)."""
        return self._flow(flow_id).rate_bps

    def rate_cap_bps(self, flow_id: int) -> float | None:
        """The flow's rate cap, None if uncapped."""
        return self._flow(flow_id).rate_cap_bps

    def next_completion_us(self) -> int | None:
        """Earliest time some flow finishes at current rates; None if none can.

        Never earlier than `now_us`: a flow that already finished but has not
        yet been returned by `advance` makes this `now_us`.
        """
        earliest: int | None = None
        for flow_id in sorted(self._flows):
            finish = self._flows[flow_id].finish_us
            if finish is not None and (earliest is None or finish < earliest):
                earliest = finish
        return None if earliest is None else max(earliest, self._now_us)

    def progress(self, flow_id: int, now_us: int) -> tuple[int, int]:
        """(bytes done, total bytes) of a flow at `now_us`, without changing the model.

        Exact even if other flows finish before `now_us` (and so speed this
        one up): that case is worked out on a private copy.
        """
        self._check_time(now_us)
        flow = self._flow(flow_id)
        if flow.finished:
            return flow.nbytes, flow.nbytes
        earliest = self._earliest_unfinished_finish_us()
        if earliest is not None and earliest <= now_us:
            # Some completion (maybe this flow's) lies in between and changes
            # rates; replay it on a copy rather than extrapolate wrongly.
            shadow = copy.deepcopy(self)
            shadow._catch_up(now_us)
            flow = shadow._flows[flow_id]
            if flow.finished:
                return flow.nbytes, flow.nbytes
        done = min(math.floor(self._bytes_at(flow, now_us)), flow.nbytes)
        return done, flow.nbytes

    # ---------------------------------------------------------------- mutations

    def start(
        self,
        flow_id: int,
        src: str,
        dst: str,
        nbytes: int,
        now_us: int,
        qos: str = "default",
        rate_cap_bps: float | None = None,
    ) -> None:
        """Start a transfer of `nbytes` from region `src` to region `dst` at `now_us`.

        A zero-byte flow takes no bandwidth and is returned by the next
        `advance`, paused or not.

        Raises:
            ValueError: duplicate id, src == dst, unknown region or pair,
                unknown QoS class, negative size, bad cap, time going back.
        """
        self._check_time(now_us)
        if flow_id in self._flows:
            raise ValueError(f"flow {flow_id} is already active")
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"flow {flow_id}: nbytes must be an int >= 0, got {nbytes!r}")
        if src == dst:
            raise ValueError(f"flow {flow_id}: src and dst are both {src!r}")
        for region in (src, dst):
            self._check_region(region)
        links = flow_path(src, dst)
        if links[1] not in self._capacity_bps:
            raise ValueError(f"flow {flow_id}: unknown region pair ({src!r}, {dst!r})")
        if qos not in self._qos_weights:
            raise ValueError(
                f"flow {flow_id}: unknown qos {qos!r} (known: {sorted(self._qos_weights)})"
            )
        cap = _check_rate_cap(flow_id, rate_cap_bps)

        self._catch_up(now_us)
        flow = _Flow(
            flow_id=flow_id,
            src=src,
            dst=dst,
            nbytes=nbytes,
            qos=qos,
            weight=self._qos_weights[qos],
            links=links,
            rate_cap_bps=cap,
            done_bytes=0.0,
            anchor_us=now_us,
            rate_bps=0.0,
            finish_us=None,
        )
        flow.finish_us = self._finish_time_us(flow)
        self._flows[flow_id] = flow
        self._reallocate(now_us)
        self._version += 1

    def cancel(self, flow_id: int, now_us: int) -> int:
        """Stop a flow at `now_us` and forget it; returns the bytes it had moved.

        Cancelling a flow that finished but was not yet returned by `advance`
        returns its full size (and `advance` will not return it).
        """
        self._check_time(now_us)
        self._flow(flow_id)
        self._catch_up(now_us)
        flow = self._flows.pop(flow_id)
        if flow.finished:
            moved = flow.nbytes
        else:
            moved = min(math.floor(self._bytes_at(flow, now_us)), flow.nbytes)
        self._reallocate(now_us)
        self._version += 1
        return moved

    def set_pair_down(self, a: str, b: str, down: bool, now_us: int) -> None:
        """Partition (down=True) or heal the WAN link between regions `a` and `b`.

        Flows between the two regions pause with their bytes kept and resume
        on heal. Independent of `set_region_down`: healing a pair does not
        bring up a region that is down, nor the reverse.
        """
        self._check_time(now_us)
        for region in (a, b):
            self._check_region(region)
        if a == b:
            raise ValueError(f"pair ({a!r}, {b!r}) joins a region to itself")
        link: Link = ("pair", *sorted((a, b)))
        if link not in self._capacity_bps:
            raise ValueError(f"unknown region pair ({a!r}, {b!r})")
        changed = self._catch_up(now_us)
        if down:
            self._pairs_down.add(link)
        else:
            self._pairs_down.discard(link)
        changed = self._reallocate(now_us) or changed
        if changed:
            self._version += 1

    def set_region_down(self, region: str, down: bool, now_us: int) -> None:
        """Take a whole region off the WAN (down=True) or bring it back.

        Every flow into or out of the region pauses; on recovery they resume.
        """
        self._check_time(now_us)
        self._check_region(region)
        changed = self._catch_up(now_us)
        if down:
            self._regions_down.add(region)
        else:
            self._regions_down.discard(region)
        changed = self._reallocate(now_us) or changed
        if changed:
            self._version += 1

    def set_rate_cap(self, flow_id: int, cap: float | None, now_us: int) -> None:
        """Set (or with None clear) a flow's rate cap in bytes/s from `now_us` on.

        Used to pace a transfer so it just meets a soft deadline and leaves
        the rest of the link to others. A cap of 0 holds the flow still.
        """
        self._check_time(now_us)
        flow = self._flow(flow_id)
        checked = _check_rate_cap(flow_id, cap)
        changed = self._catch_up(now_us)
        flow.rate_cap_bps = checked
        changed = self._reallocate(now_us) or changed
        if changed:
            self._version += 1

    def advance(self, now_us: int) -> list[int]:
        """Move every flow forward to `now_us`; return and forget the finished ones.

        Completions between the last update and `now_us` are processed in
        time order, each one re-sharing the links at its own instant, so one
        call spanning several completions gives the same result as a call at
        each of them. Returns the finished flow ids sorted.
        """
        self._check_time(now_us)
        changed = self._catch_up(now_us)
        finished = [fid for fid in sorted(self._flows) if self._flows[fid].finished]
        for flow_id in finished:
            del self._flows[flow_id]
        if changed or finished:
            self._version += 1
        return finished

    # ----------------------------------------------------------------- internal

    def _flow(self, flow_id: int) -> _Flow:
        try:
            return self._flows[flow_id]
        except KeyError:
            raise KeyError(f"no active flow {flow_id}") from None

    def _check_region(self, region: str) -> None:
        if region not in self._regions:
            raise ValueError(f"unknown region {region!r}")

    def _check_time(self, now_us: int) -> None:
        if isinstance(now_us, bool) or not isinstance(now_us, int):
            raise ValueError(f"now_us must be an int of microseconds, got {now_us!r}")
        if now_us < self._now_us:
            raise ValueError(f"time went backwards: {now_us} us < {self._now_us} us")

    def _bytes_at(self, flow: _Flow, t_us: int) -> float:
        """Bytes done at `t_us` at the flow's current rate, never above its size."""
        if flow.finished:
            return float(flow.nbytes)
        done = flow.done_bytes + flow.rate_bps * (t_us - flow.anchor_us) / US_PER_S
        return min(done, float(flow.nbytes))

    def _finish_time_us(self, flow: _Flow) -> int | None:
        """When the flow completes at its current rate; None if it cannot."""
        remaining = flow.nbytes - flow.done_bytes
        if remaining <= DONE_EPS_BYTES:
            return flow.anchor_us
        if flow.rate_bps <= 0.0:
            return None
        duration_us = remaining * US_PER_S / flow.rate_bps
        if not math.isfinite(duration_us):
            # A rate so small the time overflows a float: never, in practice.
            return None
        return flow.anchor_us + _ceil_us(duration_us)

    def _earliest_unfinished_finish_us(self) -> int | None:
        earliest: int | None = None
        for flow_id in sorted(self._flows):
            flow = self._flows[flow_id]
            if flow.finished or flow.finish_us is None:
                continue
            if earliest is None or flow.finish_us < earliest:
                earliest = flow.finish_us
        return earliest

    def _catch_up(self, now_us: int) -> bool:
        """Advance time to `now_us`, finishing flows at their completion instants.

        Finished flows stay held (rate 0, marked) until `advance` returns
        them, so a mutating call never swallows a completion. Returns whether
        any flow finished (and rates were re-shared).
        """
        changed = False
        while True:
            t_us = self._earliest_unfinished_finish_us()
            if t_us is None or t_us > now_us:
                break
            # A zero-byte flow started now carries finish == now; never step back.
            t_us = max(t_us, self._now_us)
            self._now_us = t_us
            for flow_id in sorted(self._flows):
                flow = self._flows[flow_id]
                if not flow.finished and flow.finish_us is not None and flow.finish_us <= t_us:
                    flow.finished = True
                    flow.done_bytes = float(flow.nbytes)
                    flow.rate_bps = 0.0
                    flow.anchor_us = t_us
            # The survivors re-share the freed capacity from this instant.
            self._reallocate(t_us)
            changed = True
        self._now_us = now_us
        return changed

    def _paused(self, flow: _Flow) -> bool:
        return any(self.link_down(link) for link in flow.links)

    def _reallocate(self, t_us: int) -> bool:
        """Recompute every rate at `t_us`; re-anchor the flows whose rate changed.

        Returns whether any rate changed.
        """
        runnable: list[_Flow] = []
        for flow_id in sorted(self._flows):
            flow = self._flows[flow_id]
            if flow.finished or self._paused(flow):
                continue
            if flow.nbytes - self._bytes_at(flow, t_us) <= DONE_EPS_BYTES:
                # Done in all but name (reported at the next advance): it
                # must not hold a share of any link meanwhile.
                continue
            runnable.append(flow)
        new_rates = self._water_fill(runnable)
        changed = False
        for flow_id in sorted(self._flows):
            flow = self._flows[flow_id]
            if flow.finished:
                continue
            rate = new_rates.get(flow_id, 0.0)
            if rate != flow.rate_bps:
                flow.done_bytes = self._bytes_at(flow, t_us)
                flow.anchor_us = t_us
                flow.rate_bps = rate
                flow.finish_us = self._finish_time_us(flow)
                changed = True
        return changed

    def _water_fill(self, flows: list[_Flow]) -> dict[int, float]:
        """Weighted max-min rates by progressive filling; `flows` sorted by id.

        Each round finds the lowest fill level `level` (rate per unit of
        weight) at which either some link saturates (its residual capacity
        divided by the summed weight of its unfrozen flows) or some flow hits
        its cap (cap / weight). Flows on the saturated links get
        `weight * level`, capped flows get their cap; both freeze and their
        rates come off the residual capacity of every link they cross.
        """
        rates: dict[int, float] = {}
        residual_bps: dict[Link, float] = {}
        for flow in flows:
            for link in flow.links:
                residual_bps[link] = self._capacity_bps[link]
        unfrozen = list(flows)
        while unfrozen:
            weight_sum: dict[Link, float] = {}
            for flow in unfrozen:
                for link in flow.links:
                    weight_sum[link] = weight_sum.get(link, 0.0) + flow.weight
            link_level = {
                link: max(residual_bps[link], 0.0) / weight_sum[link] for link in sorted(weight_sum)
            }
            level = min(link_level.values())
            for flow in unfrozen:
                if flow.rate_cap_bps is not None:
                    level = min(level, flow.rate_cap_bps / flow.weight)
            bound = level * (1.0 + _TIE_REL)
            saturated = {link for link, lvl in link_level.items() if lvl <= bound}
            still: list[_Flow] = []
            frozen: list[_Flow] = []
            for flow in unfrozen:
                cap = flow.rate_cap_bps
                if any(link in saturated for link in flow.links):
                    rate = flow.weight * level
                    rates[flow.flow_id] = rate if cap is None else min(rate, cap)
                elif cap is not None and cap / flow.weight <= bound:
                    rates[flow.flow_id] = cap
                else:
                    still.append(flow)
                    continue
                frozen.append(flow)
            if not frozen:
                raise EmulatorInternalError("water-filling froze no flow in a round")
            for flow in frozen:
                for link in flow.links:
                    residual_bps[link] -= rates[flow.flow_id]
            unfrozen = still
        return rates
